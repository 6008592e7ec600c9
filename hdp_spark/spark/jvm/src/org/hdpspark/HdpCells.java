package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The per-(group, epsilon level, category code) cells of hdp_spark's aggregators, in one pass
 * with map-side partial aggregation: the row count and the exact sums of fixed-point encoded
 * values of each cell.
 *
 * <p>Children: {@code eps} (numeric: the row's epsilon), {@code category} (the histogram's
 * category column; a constant 0 for a mean), {@code rules} (constant array: invalid level,
 * below-grid level, floor, cap, fixed-point one), {@code grid} (constant array of grid
 * points, or null for exact levels), {@code group} (the group's grouping values as a struct,
 * put in by {@link HdpGroupRule}; a {@link HdpGroup} placeholder before that),
 * {@code categories} (the histogram's constant domain, strings or integers; null for a mean),
 * {@code query} (an {@link HdpQuery} placeholder carrying the group decision, replaced at
 * analysis by {@link HdpQueryRule} with the query's fingerprint), then per value column four
 * children: the value (numeric) and the constants lower, upper
 * and fill.
 *
 * <p>The per-row rules are the same IEEE-754 operations as hdp_spark's numpy references
 * ({@code levels_numpy}, {@code encode_numpy}): the level rules (invalid: null, NaN or
 * negative; positive below the floor or zero: 0; finite above the cap: the cap; on a grid,
 * the largest grid point at or below epsilon, or the below-grid level) and the encoding
 * (null or NaN: fill; clamp to [lower, upper]; floor((x - lower) / span * one + 0.5)).
 *
 * <p>Result: struct(group string, level array&lt;double&gt;, code array&lt;int&gt;,
 * n array&lt;bigint&gt;, sums array&lt;bigint&gt;, query string) with the cells sorted by (level, code) and
 * {@code sums} flattened (k values per cell). The group is text (see {@link GroupText}); it
 * binds the noise of each group to the group's identity, so that two groups with identical
 * statistics never share noise. The query fingerprint (null when no analyzer rule set it)
 * binds the noise of each query to what it aggregates, so that two different queries with
 * identical statistics never share noise either.
 *
 * <p>Privacy: this computes exact, private statistics. They never leave Spark except through
 * the finalize that adds noise; the cells are sums of integers, exact and independent of the
 * order of rows and partitions, so re-evaluation yields the same cells (and the same noise).
 */
public final class HdpCells extends HdpAggregate<CellState> {

  private static final long serialVersionUID = 1L;

  static final StructType RESULT = new StructType(new StructField[] {
      DataTypes.createStructField("group", DataTypes.StringType, true),
      DataTypes.createStructField("level", DataTypes.createArrayType(DataTypes.DoubleType, false), false),
      DataTypes.createStructField("code", DataTypes.createArrayType(DataTypes.IntegerType, false), false),
      DataTypes.createStructField("n", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("sums", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("query", DataTypes.StringType, true),
  });

  static final int VALUES = 7;
  static final int GROUP = 4;
  static final int CATEGORIES = 5;
  static final int QUERY = 6;

  private final double invalid;
  private final double belowGrid;
  private final double floor;
  private final double cap;
  private final double one;
  private final double[] grid;
  private final double[] lower;
  private final double[] upper;
  private final double[] fill;
  private final String paramProblem;
  private final java.util.HashMap<Object, Integer> domain = new java.util.HashMap<>();
  private boolean categorical;
  private boolean textDomain;
  private int unmatched;

  public HdpCells(Seq<Expression> children, int mutableOffset, int inputOffset) {
    this(children, mutableOffset, inputOffset, false);
  }

  /**
   * {@code strict}: a release's aggregate (a Column or SQL aggregator with a group decision),
   * which refuses a group holding an ε no release can honour with one short error, in the
   * release API's words ({@link EpsCheck}); the release API's own native pass is not strict
   * (it counts such rows over the whole table and raises before any noise).
   */
  public HdpCells(Seq<Expression> children, int mutableOffset, int inputOffset,
      boolean strict) {
    super(children, mutableOffset, inputOffset, strict);
    if (kids.length < VALUES || (kids.length - VALUES) % 4 != 0) {
      throw new IllegalArgumentException("hdp_cells takes (eps, category, rules, grid, "
          + "group, categories, query, [value, lower, upper, fill]...)");
    }
    double[] rules = null;
    double[] points = null;
    int k = width();
    double[] lo = new double[k];
    double[] hi = new double[k];
    double[] fl = new double[k];
    String problem = null;
    try {
      // reported, not thrown: Spark rebuilds this node with other children when it prints
      // an expression for its own errors (a nondeterministic argument, say)
      if (!(kids[QUERY] instanceof HdpQuery) && !(kids[QUERY] instanceof Literal
          && kids[QUERY].dataType() instanceof StringType)) {
        throw new IllegalArgumentException("hdp_cells: the query child must be a "
            + "placeholder or the constant fingerprint");
      }
      rules = constants(kids[2]);
      if (rules == null || rules.length != 5) {
        throw new IllegalArgumentException("hdp_cells: `rules` must be a constant array of 5");
      }
      points = constants(kids[3]);
      if (!kids[CATEGORIES].foldable()) {
        throw new IllegalArgumentException("hdp_cells: `categories` must be a constant");
      }
      Object cats = kids[CATEGORIES].eval(null);
      if (cats != null) {
        ArrayData a = (ArrayData) cats;
        DataType et = ((ArrayType) kids[CATEGORIES].dataType()).elementType();
        for (int i = 0; i < a.numElements(); i++) {
          Object key = et instanceof StringType ? (Object) a.getUTF8String(i).clone()
              : (Object) a.getLong(i);
          domain.put(key, i);
        }
        textDomain = et instanceof StringType;
        unmatched = a.numElements();
      }
      categorical = cats != null;
      for (int j = 0; j < k; j++) {
        lo[j] = constant(kids[VALUES + 4 * j + 1]);
        hi[j] = constant(kids[VALUES + 4 * j + 2]);
        fl[j] = constant(kids[VALUES + 4 * j + 3]);
      }
    } catch (RuntimeException e) {
      // reported by checkInputDataTypes (the analyzer may build this node from children
      // that are not resolved yet)
      problem = e.getMessage();
      rules = new double[5];
    }
    paramProblem = problem;
    invalid = rules[0];
    belowGrid = rules[1];
    floor = rules[2];
    cap = rules[3];
    one = rules[4];
    grid = points;
    lower = lo;
    upper = hi;
    fill = fl;
  }

  private static double[] constants(Expression e) {
    if (!e.foldable()) {
      throw new IllegalArgumentException("hdp_cells: parameters must be constants");
    }
    Object v = e.eval(null);
    return v == null ? null : ((ArrayData) v).toDoubleArray();
  }

  private static double constant(Expression e) {
    if (!e.foldable()) {
      throw new IllegalArgumentException("hdp_cells: parameters must be constants");
    }
    return ((Number) e.eval(null)).doubleValue();
  }

  private transient int[] doubleSlots;

  /** Child {@code i} as a double (NaN for null): a bound double column is read in place. */
  private double read(int i, InternalRow input) {
    if (doubleSlots == null) {
      int[] slots = new int[kids.length];
      for (int j = 0; j < kids.length; j++) {
        Expression e = kids[j];
        slots[j] = e instanceof BoundReference && e.dataType() instanceof DoubleType
            ? ((BoundReference) e).ordinal() : -1;
      }
      doubleSlots = slots;
    }
    int o = doubleSlots[i];
    if (o >= 0) {
      return input.isNullAt(o) ? Double.NaN : input.getDouble(o);
    }
    return real(kids[i].eval(input));
  }

  /**
   * The category code of a row: its label's position in the domain, or the unmatched code
   * for null and unknown labels (the release API's rules: strings by exact bytes; integer
   * labels against an integral column as long, against a fractional column as double, so
   * 2.0 matches 2 and NaN or infinities match nothing). 0 without a domain (a mean).
   */
  private int code(InternalRow input) {
    if (!categorical) {
      return 0;
    }
    Object v = kids[1].eval(input);
    if (v == null) {
      return unmatched;
    }
    Integer at;
    if (textDomain) {
      at = domain.get(v);
    } else if (v instanceof Long || v instanceof Integer || v instanceof Short
        || v instanceof Byte) {
      at = domain.get(((Number) v).longValue());
    } else {
      double d = real(v);
      long l = (long) d;
      at = !Double.isNaN(d) && !Double.isInfinite(d) && (double) l == d ? domain.get(l) : null;
    }
    return at == null ? unmatched : at;
  }

  /**
   * The integer code this aggregator reads from a row, for the privacy unit's row rank
   * ({@link HdpRowCode}): a histogram's category code, else the first value's fixed-point
   * encoding (a mean), by the rules the cells use.
   */
  long rowCode(InternalRow input) {
    if (paramProblem != null) {
      throw new IllegalArgumentException(paramProblem);
    }
    return categorical ? code(input) : encode(0, read(VALUES, input));
  }

  /** A numeric value as Spark's CAST(... AS DOUBLE) gives it; NaN for null. */
  static double real(Object v) {
    if (v == null) {
      return Double.NaN;
    }
    if (v instanceof Double) {
      return (Double) v;
    }
    if (v instanceof Decimal) {
      return ((Decimal) v).toDouble();
    }
    return ((Number) v).doubleValue();
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    String bad = numeric(kids[0], "ε");
    if (bad == null && categorical) {
      DataType t = kids[1].dataType();
      if (textDomain && !(t instanceof StringType)) {
        bad = "category column `" + name(kids[1]) + "` must hold strings for string "
            + "`categories`, got " + t.simpleString() + ".";
      } else if (!textDomain && !(t instanceof NumericType)) {
        bad = "category column `" + name(kids[1]) + "` must be numeric (integer or float) for "
            + "integer `categories`, got " + t.simpleString() + ".";
      }
    }
    for (int j = 0; bad == null && j < width(); j++) {
      bad = numeric(kids[VALUES + 4 * j], "value");
    }
    if (bad == null) {
      bad = paramProblem;
    }
    if (bad != null) {  // the release API's words, not Spark's "hdp_cells(...)" text
      throw new IllegalArgumentException("SchemaError: " + bad);
    }
    return TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  private static String name(Expression e) {
    return e instanceof org.apache.spark.sql.catalyst.expressions.NamedExpression
        ? ((org.apache.spark.sql.catalyst.expressions.NamedExpression) e).name() : e.sql();
  }

  private static String numeric(Expression e, String role) {
    if (e.dataType() instanceof NumericType) {
      return null;
    }
    return role + " column `" + name(e) + "` must be numeric, got "
        + e.dataType().simpleString() + ".";
  }

  /** The level rules of one epsilon (NaN stands for null). */
  double level(double raw) {
    if (Double.isNaN(raw) || raw < 0) {
      return invalid;
    }
    double e = (raw > 0 && raw < floor) || raw == 0 ? 0.0 : raw;
    if (!Double.isInfinite(e) && e > cap) {
      e = cap;
    }
    if (grid == null || !(e > 0) || Double.isInfinite(e)) {
      return e;
    }
    // the largest grid point <= e (numpy's searchsorted(side="right") - 1)
    int lo = 0;
    int hi = grid.length;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (grid[mid] <= e) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo == 0 ? belowGrid : grid[lo - 1];
  }

  /** The fixed-point encoding of one value (NaN stands for null). */
  long encode(int j, double x) {
    if (Double.isNaN(x)) {
      x = fill[j];
    }
    x = Math.min(Math.max(x, lower[j]), upper[j]);
    double span = upper[j] - lower[j];
    double u = (x - lower[j]) / span;
    return (long) Math.floor(u * one + 0.5);
  }

  static Seq<Expression> seq(List<Expression> list) {
    return CollectionConverters.asScala(list).toSeq();
  }

  int width() {
    return (kids.length - VALUES) / 4;
  }

  @Override
  public CellState createAggregationBuffer() {
    return new CellState(width());
  }

  @Override
  public CellState update(CellState s, InternalRow input) {
    if (!s.grouped) {
      Object g = kids[GROUP].eval(input);
      s.group = GroupText.of(g, kids[GROUP].dataType());
      s.grouped = true;
    }
    int c = s.cell(level(read(0, input)), code(input));
    int base = c * (s.k + 1);
    s.acc[base] += 1;
    for (int j = 0; j < s.k; j++) {
      s.acc[base + 1 + j] += encode(j, read(VALUES + 4 * j, input));
    }
    return s;
  }

  @Override
  public CellState merge(CellState a, CellState b) {
    if (!a.grouped && b.grouped) {
      a.group = b.group;
      a.grouped = true;
    }
    int w = a.k + 1;
    for (int c = 0; c < b.size; c++) {
      int at = a.cell(b.level[c], b.code[c]);
      for (int j = 0; j < w; j++) {
        a.acc[at * w + j] += b.acc[c * w + j];
      }
    }
    return a;
  }

  @Override
  public Object eval(CellState s) {
    if (strict) {
      EpsCheck.check(s, invalid, belowGrid, name(kids[0]),
          ((StructType) kids[GROUP].dataType()).fields().length > 0);
    }
    Integer[] order = new Integer[s.size];
    for (int i = 0; i < s.size; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (x, y) -> {
      int r = Double.compare(s.level[x], s.level[y]);
      return r != 0 ? r : Integer.compare(s.code[x], s.code[y]);
    });
    int w = s.k + 1;
    Object[] lv = new Object[s.size];
    Object[] cd = new Object[s.size];
    Object[] n = new Object[s.size];
    Object[] sums = new Object[s.size * s.k];
    for (int i = 0; i < s.size; i++) {
      int c = order[i];
      lv[i] = s.level[c];
      cd[i] = s.code[c];
      n[i] = s.acc[c * w];
      for (int j = 0; j < s.k; j++) {
        sums[i * s.k + j] = s.acc[c * w + 1 + j];
      }
    }
    return new GenericInternalRow(new Object[] {
        s.group == null ? null : UTF8String.fromString(s.group),
        new GenericArrayData(lv), new GenericArrayData(cd), new GenericArrayData(n),
        new GenericArrayData(sums), kids[QUERY].eval(null)});
  }

  @Override
  HdpCells copy(Seq<Expression> children, int mutableOffset, int inputOffset, boolean strict) {
    return new HdpCells(children, mutableOffset, inputOffset, strict);
  }

  @Override
  int queryIndex() {
    return QUERY;
  }

  @Override
  boolean hasStrict() {
    return true;
  }

  /** This aggregate as a release's (see the strict constructor). */
  @Override
  public HdpCells strict() {
    return new HdpCells(children(), mutableOffset, inputOffset, true);
  }

  @Override
  public CellState deserialize(byte[] bytes) {
    return CellState.fromBytes(bytes);
  }

  @Override
  public DataType dataType() {
    return RESULT;
  }

  @Override
  public String prettyName() {
    return "hdp_cells";
  }

  static List<Expression> list(Expression... items) {
    return new ArrayList<>(Arrays.asList(items));
  }
}
