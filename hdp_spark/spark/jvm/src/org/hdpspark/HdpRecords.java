package org.hdpspark;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.CharType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.VarcharType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The exact sufficient statistics of the partial-DP heavy hitters, per group, in one pass
 * with map-side partial aggregation: the count of each distinct whole record, a record
 * being its attributes' codes as one mixed-radix {@code long} key (most significant first,
 * the key the release API's tree uses: {@code key = sum code_j * w_j}, w_j the product of
 * the later attributes' domain sizes).
 *
 * <p>Children: {@code group} (an {@link HdpGroup} placeholder until {@link HdpGroupRule}),
 * {@code query} (an {@link HdpQuery} placeholder carrying the group decision until
 * {@link HdpQueryRule}), then per attribute five: the column, its domain kind (constant
 * {@code 'str'}, {@code 'bool'} or {@code 'number'}), its public values (constant array of
 * strings; numbers as {@code i:<integer>} or {@code d:<float>}), its number of codes and its
 * "other" code (constant ints).
 *
 * <p>Recoding, the release API's Spark rules ({@code encode_codes}): a value's code is the
 * position of the first domain value equal to it, else the other code (null, NaN and values
 * outside the domain: never an error). Strings by their bytes; numbers as Spark compares a
 * column with the release API's literals: an integer domain value exactly against an
 * integral or decimal column, as a double against a float column; a float domain value as a
 * double (0.0 equals -0.0).
 *
 * <p>Memory (public facts): a group's state holds at most min(rows of the group, product of
 * the domain sizes) entries of 16 bytes (32 with the map's free slots); the Python API refuses,
 * before any job, a product above its {@code max_records}.
 *
 * <p>Result: struct(group string, key array&lt;bigint&gt;, n array&lt;bigint&gt;, query string),
 * keys ascending. Privacy: exact, private statistics; they leave Spark only through the
 * finalize that runs the mechanism. Counts are exact integers, independent of the order of
 * rows and partitions, so re-evaluation gives the same statistics (and the same noise).
 */
public final class HdpRecords extends HdpAggregate<RecordState> {

  private static final long serialVersionUID = 1L;

  public static final String FUNCTION = "hdp_records";

  static final StructType RESULT = new StructType(new StructField[] {
      DataTypes.createStructField("group", DataTypes.StringType, true),
      DataTypes.createStructField("key", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("n", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("query", DataTypes.StringType, true),
  });

  static final int GROUP = 0;
  static final int QUERY = 1;
  static final int ATTRS = 2;
  static final int PER = 5;

  private final Recoder[] recoders;
  private final long[] weights;
  private final String problem;

  public HdpRecords(Seq<Expression> children, int mutableOffset, int inputOffset) {
    super(children, mutableOffset, inputOffset, false);
    int d = Math.max(0, (kids.length - ATTRS) / PER);
    Recoder[] rec = new Recoder[d];
    long[] w = new long[d];
    String bad = null;
    try {
      if (kids.length < ATTRS + 2 * PER || (kids.length - ATTRS) % PER != 0) {
        throw new IllegalArgumentException("hdp_records takes (groups, [column, kind, "
            + "values, size, other] for each of at least 2 attributes)");
      }
      long weight = 1;
      for (int j = d - 1; j >= 0; j--) {
        int at = ATTRS + PER * j;
        rec[j] = new Recoder(HdpQueryRule.constantText(kids[at + 1], "kind"),
            texts(kids[at + 2]), integer(kids[at + 3]), integer(kids[at + 4]));
        w[j] = weight;
        weight = Math.multiplyExact(weight, (long) rec[j].size);
      }
    } catch (RuntimeException e) {  // reported by checkInputDataTypes (see HdpCells)
      bad = e.getMessage();
    }
    recoders = rec;
    weights = w;
    problem = bad;
  }

  private static String[] texts(Expression e) {
    if (!e.foldable()) {
      throw new IllegalArgumentException("hdp_records: `values` must be a constant");
    }
    ArrayData a = (ArrayData) e.eval(null);
    String[] out = new String[a.numElements()];
    for (int i = 0; i < out.length; i++) {
      out[i] = a.getUTF8String(i).toString();
    }
    return out;
  }

  private static int integer(Expression e) {
    if (!e.foldable()) {
      throw new IllegalArgumentException("hdp_records: sizes must be constants");
    }
    return ((Number) e.eval(null)).intValue();
  }

  /** One attribute's public domain: value to code, with the release API's equality. */
  static final class Recoder implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final String kind;
    final int size;
    final int other;
    final HashMap<UTF8String, Integer> text = new HashMap<>();
    final HashMap<Long, Integer> exact = new HashMap<>();  // integer values
    final HashMap<Long, Integer> floats = new HashMap<>();  // float values, by their bits
    final HashMap<Long, Integer> all = new HashMap<>();  // every number as a double
    Integer yes;
    Integer no;

    Recoder(String kind, String[] values, int size, int other) {
      this.kind = kind;
      this.size = size;
      this.other = other;
      if (other < 0 || other >= size || values.length > size) {
        throw new IllegalArgumentException("hdp_records: bad domain sizes");
      }
      for (int i = 0; i < values.length; i++) {
        String v = values[i];
        switch (kind) {
          case "str":
            text.putIfAbsent(UTF8String.fromString(v), i);
            break;
          case "bool":
            if ("true".equals(v) && yes == null) {
              yes = i;
            } else if ("false".equals(v) && no == null) {
              no = i;
            }
            break;
          case "number":
            if (v.startsWith("i:")) {
              long l = Long.parseLong(v.substring(2));
              exact.putIfAbsent(l, i);
              all.putIfAbsent(bits((double) l), i);
            } else if (v.startsWith("d:")) {
              double x = Double.parseDouble(v.substring(2));
              floats.putIfAbsent(bits(x), i);
              all.putIfAbsent(bits(x), i);
            } else {
              throw new IllegalArgumentException("hdp_records: bad number " + v);
            }
            break;
          default:
            throw new IllegalArgumentException("hdp_records: unknown kind " + kind);
        }
      }
    }

    static long bits(double x) {
      return Double.doubleToLongBits(x == 0.0 ? 0.0 : x);  // -0.0 equals 0.0
    }

    private int or(Integer a, Integer b) {
      if (a == null) {
        return b == null ? other : b;
      }
      return b == null || a < b ? a : b;
    }

    int code(Object v) {
      if (v == null) {
        return other;
      }
      switch (kind) {
        case "str":
          Integer t = text.get((UTF8String) v);
          return t == null ? other : t;
        case "bool":
          Integer b = ((Boolean) v) ? yes : no;
          return b == null ? other : b;
        default:
          if (v instanceof Double || v instanceof Float) {
            double x = ((Number) v).doubleValue();
            return Double.isNaN(x) ? other : or(all.get(bits(x)), null);
          }
          if (v instanceof Decimal) {
            BigDecimal bd = ((Decimal) v).toJavaBigDecimal();
            Integer e = null;
            if (bd.signum() == 0 || bd.stripTrailingZeros().scale() <= 0) {
              try {
                e = exact.get(bd.longValueExact());
              } catch (ArithmeticException outside) {
                e = null;
              }
            }
            return or(e, floats.get(bits(bd.doubleValue())));
          }
          long l = ((Number) v).longValue();
          return or(exact.get(l), floats.get(bits((double) l)));
      }
    }

    String check(Expression column) {
      DataType t = column.dataType();
      boolean ok = "str".equals(kind)
          ? t instanceof StringType || t instanceof VarcharType || t instanceof CharType
          : "bool".equals(kind) ? t instanceof BooleanType : t instanceof NumericType;
      if (ok) {
        return null;
      }
      String name = column instanceof org.apache.spark.sql.catalyst.expressions.NamedExpression
          ? ((org.apache.spark.sql.catalyst.expressions.NamedExpression) column).name()
          : column.sql();
      return "attribute column `" + name + "` has type " + t.simpleString() + ", which "
          + "cannot hold the " + kind + " values of its domain.";
    }
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    String bad = problem;
    for (int j = 0; bad == null && j < recoders.length; j++) {
      bad = recoders[j].check(kids[ATTRS + PER * j]);
    }
    if (bad != null) {  // the release API's words
      throw new IllegalArgumentException("SchemaError: " + bad);
    }
    if (!(kids[QUERY] instanceof HdpQuery) && !(kids[QUERY] instanceof Literal
        && kids[QUERY].dataType() instanceof StringType)) {
      throw new IllegalArgumentException("hdp_records: the query child must be a "
          + "placeholder or the constant fingerprint");
    }
    return TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public RecordState createAggregationBuffer() {
    return new RecordState();
  }

  @Override
  public RecordState update(RecordState s, InternalRow input) {
    if (!s.grouped) {
      s.group = GroupText.of(kids[GROUP].eval(input), kids[GROUP].dataType());
      s.grouped = true;
    }
    long key = 0;
    for (int j = 0; j < recoders.length; j++) {
      key += weights[j] * recoders[j].code(kids[ATTRS + PER * j].eval(input));
    }
    s.add(key, 1);
    return s;
  }

  @Override
  public RecordState merge(RecordState a, RecordState b) {
    a.merge(b);
    return a;
  }

  @Override
  public Object eval(RecordState s) {
    long[][] kn = s.sorted();
    Object[] k = new Object[kn[0].length];
    Object[] n = new Object[kn[0].length];
    for (int i = 0; i < k.length; i++) {
      k[i] = kn[0][i];
      n[i] = kn[1][i];
    }
    return new GenericInternalRow(new Object[] {
        s.group == null ? null : UTF8String.fromString(s.group),
        new GenericArrayData(k), new GenericArrayData(n), kids[QUERY].eval(null)});
  }

  @Override
  HdpRecords copy(Seq<Expression> children, int mutableOffset, int inputOffset, boolean strict) {
    return new HdpRecords(children, mutableOffset, inputOffset);
  }

  @Override
  int queryIndex() {
    return QUERY;
  }

  @Override
  public HdpRecords strict() {  // no per-row rule can fail: every value has a code
    return this;
  }

  @Override
  public RecordState deserialize(byte[] bytes) {
    return RecordState.fromBytes(bytes);
  }

  @Override
  public DataType dataType() {
    return RESULT;
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }

  /** Builds hdp_records(groups, [column, kind, values, size, other]...) with the group and
   * query placeholders first (see {@link HdpExtensions}). */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = new ArrayList<>(CollectionConverters.asJava(args));
      if (in.isEmpty()) {
        throw new IllegalArgumentException("hdp_records takes (groups, [column, kind, values, "
            + "size, other]...)");
      }
      Expression groups = new HdpQuery(HdpQueryRule.constantText(in.get(0), "groups"));
      in.set(0, groups);
      in.add(GROUP, new HdpGroup());
      return new HdpRecords(HdpCells.seq(in), 0, 0);
    }
  }
}
