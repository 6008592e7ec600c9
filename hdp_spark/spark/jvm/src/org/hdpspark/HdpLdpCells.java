package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateUnsafeProjection$;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The exact sufficient statistics of the local-DP aggregators, per group, in one pass with
 * map-side partial aggregation: per (epsilon level, index) cell the row count and the sums of
 * the two limbs of the reports' fixed-point integers -- the same integers the release API's
 * native {@code groupBy(level, index).agg(count, sum(hi), sum(lo))} computes.
 *
 * <p>Children: {@code group} (an {@link HdpGroup} placeholder until {@link HdpGroupRule}),
 * {@code query} (an {@link HdpQuery} placeholder carrying the group decision until
 * {@link HdpQueryRule}), {@code level} (double: the release API's level expression of the
 * epsilon column), {@code index} (bigint: 0, the coordinate offset or the projection row;
 * negative for a missing or malformed report), {@code q} (the report's fixed-point integer,
 * bigint, or for a vector mean the array of its coordinates' integers: the release API's
 * encoding expressions, computed by Spark before this aggregate), then the public checks:
 * {@code mechanism} (constant string: the randomizer the reports must come from),
 * {@code declared} (constant boolean: the caller's {@code already_randomized}), {@code roles}
 * (constant array of strings, one per remaining child) and the raw columns themselves (the
 * epsilon column first, then the report columns), read for their types and their
 * {@code hdp_ldp_report} marker only.
 *
 * <p>Per row: a negative index adds one row to cell (level, -1); otherwise a scalar q adds
 * one row and q's limbs ({@code q >> 31}, {@code q & (2^31 - 1)}) to cell (level, index), and
 * a vector adds, for each coordinate k, one row and the limbs of q[k] to cell
 * (level, index + k) -- what the release API's {@code posexplode} gives. No arithmetic on the
 * reports' values happens here: the encoding is the release API's Spark expressions, which
 * this aggregate evaluates per row through one code-generated projection (with common
 * subexpression elimination: the level expression runs once per row).
 *
 * <p>Result: struct(group string, level array&lt;double&gt;, index array&lt;bigint&gt;,
 * count array&lt;bigint&gt;, hi array&lt;bigint&gt;, lo array&lt;bigint&gt;, query string),
 * cells sorted by (level, index). Privacy: the reports are already epsilon_i-LDP; the cells
 * leave Spark only through the finalize (the core LDP release, post-processing). Sums are
 * exact integers, independent of the order of rows and partitions.
 */
public final class HdpLdpCells extends HdpAggregate<LdpState> {

  private static final long serialVersionUID = 1L;

  public static final String FUNCTION = "hdp_ldp_cells";

  static final String MARK = "hdp_ldp_report";

  static final StructType RESULT = new StructType(new StructField[] {
      DataTypes.createStructField("group", DataTypes.StringType, true),
      DataTypes.createStructField("level", DataTypes.createArrayType(DataTypes.DoubleType, false), false),
      DataTypes.createStructField("index", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("count", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("hi", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("lo", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("query", DataTypes.StringType, true),
  });

  static final int GROUP = 0;
  static final int QUERY = 1;
  static final int LEVEL = 2;
  static final int INDEX = 3;
  static final int Q = 4;
  static final int MECHANISM = 5;
  static final int DECLARED = 6;
  static final int ROLES = 7;
  static final int COLUMNS = 8;
  static final int LIMB_BITS = 31;
  static final long LO_MASK = (1L << LIMB_BITS) - 1;

  private final boolean vector;
  private transient UnsafeProjection rowInputs;

  public HdpLdpCells(Seq<Expression> children, int mutableOffset, int inputOffset) {
    super(children, mutableOffset, inputOffset, false);
    this.vector = kids.length > Q && kids[Q].dataType() instanceof ArrayType;
  }

  private static String name(Expression column) {
    return column instanceof NamedExpression ? ((NamedExpression) column).name() : column.sql();
  }

  /** The first problem with the public inputs (types, markers), or null. */
  private String problem() {
    if (kids.length < COLUMNS + 2 || !(kids[LEVEL].dataType() instanceof DoubleType)
        || !(kids[INDEX].dataType() instanceof LongType)
        || !(kids[Q].dataType() instanceof LongType || (vector
            && ((ArrayType) kids[Q].dataType()).elementType() instanceof LongType))
        || !kids[MECHANISM].foldable() || !kids[DECLARED].foldable()
        || !kids[ROLES].foldable()) {
      return "InternalError: hdp_ldp_cells takes (groups, level double, index bigint, q "
          + "bigint or array<bigint>, mechanism, declared, roles, eps, reports...)";
    }
    String mechanism = HdpQueryRule.constantText(kids[MECHANISM], "mechanism");
    boolean declared = Boolean.TRUE.equals(kids[DECLARED].eval(null));
    ArrayData roles = (ArrayData) kids[ROLES].eval(null);
    if (roles == null || roles.numElements() != kids.length - COLUMNS) {
      return "InternalError: hdp_ldp_cells needs one role per checked column";
    }
    for (int i = COLUMNS; i < kids.length; i++) {
      String role = roles.getUTF8String(i - COLUMNS).toString();
      Expression c = kids[i];
      DataType t = c.dataType();
      boolean report = i > COLUMNS;
      if (report && "duchi".equals(mechanism)) {
        if (!(t instanceof ArrayType)) {
          return "SchemaError: report column `" + name(c) + "` must be an array, got "
              + t.simpleString() + ".";
        }
      } else if (!(t instanceof NumericType)) {
        return "SchemaError: " + role + " column `" + name(c) + "` must be numeric, got "
            + t.simpleString() + ".";
      }
      if (!report) {
        continue;
      }
      Metadata meta = c instanceof NamedExpression ? ((NamedExpression) c).metadata() : null;
      String mark = meta != null && meta.contains(MARK) ? meta.getString(MARK) : null;
      if (mark == null && !declared) {
        return "ParameterError: `already_randomized`: column `" + name(c) + "` carries no "
            + "local randomizer's marker (`" + MARK + "`), so it may hold raw values, and a "
            + "local-DP aggregator adds no noise: it would release their exact statistic. "
            + "Reports made by ldp_simulate carry the marker; for reports randomized on the "
            + "devices (or anywhere else outside this library) pass "
            + "`already_randomized=True` to declare that every row is already an "
            + "ε_i-LDP report.";
      }
      if (mark != null && !mark.equals(mechanism)) {
        return "ParameterError: column `" + name(c) + "` holds `" + mark + "` reports, but "
            + "its aggregator expects `" + mechanism + "` reports; use the aggregator of the "
            + "randomizer that made the reports.";
      }
    }
    return null;
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    String bad = problem();
    if (bad != null) {  // the release API's words
      throw new IllegalArgumentException(bad);
    }
    if (!(kids[QUERY] instanceof HdpQuery) && !(kids[QUERY] instanceof Literal
        && kids[QUERY].dataType() instanceof StringType)) {
      throw new IllegalArgumentException("hdp_ldp_cells: the query child must be a "
          + "placeholder or the constant fingerprint");
    }
    return TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public LdpState createAggregationBuffer() {
    return new LdpState();
  }

  @Override
  public LdpState update(LdpState s, InternalRow input) {
    if (!s.grouped) {
      s.group = GroupText.of(kids[GROUP].eval(input), kids[GROUP].dataType());
      s.grouped = true;
    }
    if (rowInputs == null) {  // the row expressions, code-generated once per task
      rowInputs = GenerateUnsafeProjection$.MODULE$.generate(
          HdpCells.seq(Arrays.asList(kids[LEVEL], kids[INDEX], kids[Q])), true);
    }
    InternalRow r = rowInputs.apply(input);
    double level = r.isNullAt(0) ? Double.NaN : r.getDouble(0);
    long bits = Double.doubleToLongBits(level == 0.0 ? 0.0 : level);  // -0.0 is 0.0
    long idx = r.isNullAt(1) ? -1L : r.getLong(1);
    if (idx < 0 || r.isNullAt(2)) {
      s.add(bits, -1L, 1, 0, 0);
    } else if (vector) {
      ArrayData a = r.getArray(2);
      for (int k = 0; k < a.numElements(); k++) {
        long v = a.isNullAt(k) ? 0L : a.getLong(k);
        s.add(bits, idx + k, 1, v >> LIMB_BITS, v & LO_MASK);
      }
    } else {
      long v = r.getLong(2);
      s.add(bits, idx, 1, v >> LIMB_BITS, v & LO_MASK);
    }
    return s;
  }

  @Override
  public LdpState merge(LdpState a, LdpState b) {
    a.merge(b);
    return a;
  }

  @Override
  public Object eval(LdpState s) {
    Integer[] at = s.sorted();
    Object[][] cols = new Object[5][at.length];
    for (int i = 0; i < at.length; i++) {
      int j = at[i];
      cols[0][i] = Double.longBitsToDouble(s.levels[j]);
      cols[1][i] = s.index[j];
      cols[2][i] = s.count[j];
      cols[3][i] = s.hi[j];
      cols[4][i] = s.lo[j];
    }
    return new GenericInternalRow(new Object[] {
        s.group == null ? null : UTF8String.fromString(s.group),
        new GenericArrayData(cols[0]), new GenericArrayData(cols[1]),
        new GenericArrayData(cols[2]), new GenericArrayData(cols[3]),
        new GenericArrayData(cols[4]), kids[QUERY].eval(null)});
  }

  @Override
  HdpLdpCells copy(Seq<Expression> children, int mutableOffset, int inputOffset, boolean strict) {
    return new HdpLdpCells(children, mutableOffset, inputOffset);
  }

  @Override
  int queryIndex() {
    return QUERY;
  }

  @Override
  public HdpLdpCells strict() {  // per row nothing can fail: bad reports go to index -1
    return this;
  }

  @Override
  public LdpState deserialize(byte[] bytes) {
    return LdpState.fromBytes(bytes);
  }

  @Override
  public DataType dataType() {
    return RESULT;
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }

  /** Builds hdp_ldp_cells(groups, level, index, q, mechanism, declared, roles, columns...)
   * with the group and query placeholders first (see {@link HdpExtensions}). */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = new ArrayList<>(CollectionConverters.asJava(args));
      if (in.isEmpty()) {
        throw new IllegalArgumentException("hdp_ldp_cells takes (groups, level, index, q, "
            + "mechanism, declared, roles, columns...)");
      }
      // a secret last argument (a privacy unit's bounding key) goes into the placeholder
      String secret = null;
      if (in.get(in.size() - 1) instanceof HdpSecret) {
        secret = ((HdpSecret) in.remove(in.size() - 1)).material();
      }
      in.set(0, new HdpQuery(HdpQueryRule.constantText(in.get(0), "groups"), secret));
      in.add(GROUP, new HdpGroup());
      return new HdpLdpCells(HdpCells.seq(in), 0, 0);
    }
  }
}
