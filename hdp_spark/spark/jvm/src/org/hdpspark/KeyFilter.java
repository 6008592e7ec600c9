package org.hdpspark;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The filter of a Column aggregator's public key list ({@code keys=[...]}): the rows whose
 * grouping values equal one of the keys, as the release API's {@code keys=} (rows with other
 * keys are left out). Each key value is matched exactly as a value of its grouping column's
 * type: a value that column cannot hold exactly (a string for an integer column, 1.5 for a
 * long column, an integer beyond 2^53 for a double column) is refused at analysis, never
 * rounded. The keys are public inputs of the caller; the filter reads the grouping columns
 * only.
 */
final class KeyFilter {

  private KeyFilter() {}

  static final String PREFIX = "keys:";

  /** The condition "the grouping values are one of the keys" over {@code groups}. */
  static Expression condition(List<Expression> groups, String decision) {
    List<List<Object>> keys = parse(decision.substring(PREFIX.length()));
    List<Expression> rows = new ArrayList<>();
    List<List<Expression>> matched = new ArrayList<>();
    for (List<Object> key : keys) {
      if (key.size() != groups.size()) {
        throw new IllegalArgumentException("hdp_spark: every key in `keys` must have "
            + groups.size() + " value(s), one per grouping column; got " + key.size());
      }
      List<Expression> values = new ArrayList<>();
      for (int j = 0; j < key.size(); j++) {
        values.add(literal(key.get(j), groups.get(j)));
      }
      matched.add(values);
    }
    if (groups.size() == 1) {
      List<Expression> list = new ArrayList<>();
      for (List<Expression> values : matched) {
        list.add(values.get(0));
      }
      return new In(groups.get(0), HdpCells.seq(list));
    }
    for (List<Expression> values : matched) {
      Expression all = null;
      for (int j = 0; j < values.size(); j++) {
        Expression eq = new EqualTo(groups.get(j), values.get(j));
        all = all == null ? eq : new And(all, eq);
      }
      rows.add(all);
    }
    Expression any = null;
    for (Expression row : rows) {
      any = any == null ? row : new Or(any, row);
    }
    return any;
  }

  @SuppressWarnings("unchecked")
  private static List<List<Object>> parse(String json) {
    try {
      return new ObjectMapper().readValue(json, List.class);
    } catch (Exception e) {  // written by hdp_spark's Python side: a bug if it fails
      throw new IllegalStateException("hdp_spark: unreadable key list", e);
    }
  }

  private static IllegalArgumentException refuse(Object value, Expression group) {
    return new IllegalArgumentException("hdp_spark: the key value " + render(value)
        + " in `keys` is not a value of the grouping column " + group.sql() + " (type "
        + group.dataType().simpleString() + "); pass keys of the column's type");
  }

  private static String render(Object value) {
    return value instanceof String ? "'" + value + "'" : String.valueOf(value);
  }

  /** {@code value} as a literal of {@code group}'s type, exactly, or refused. */
  static Literal literal(Object value, Expression group) {
    DataType t = group.dataType();
    if (t instanceof StringType) {
      if (value instanceof String) {
        return Literal.create(UTF8String.fromString((String) value), t);
      }
      throw refuse(value, group);
    }
    if (t instanceof BooleanType) {
      if (value instanceof Boolean) {
        return Literal.create(value, t);
      }
      throw refuse(value, group);
    }
    if (value instanceof Boolean || value instanceof String) {
      throw refuse(value, group);
    }
    Number n = (Number) value;
    boolean integral = n instanceof Integer || n instanceof Long || n instanceof BigInteger
        || n instanceof Short || n instanceof Byte;
    if (t instanceof DoubleType || t instanceof FloatType) {
      double d = n.doubleValue();
      boolean exact = integral ? BigInteger.valueOf((long) d).equals(big(n))
          && Math.abs(d) <= 9007199254740992.0 : true;
      if (t instanceof FloatType && (float) d != d) {
        exact = false;
      }
      if (!exact || Double.isInfinite(d)) {
        throw refuse(value, group);
      }
      return t instanceof FloatType ? Literal.create((float) d, t) : Literal.create(d, t);
    }
    long lo;
    long hi;
    if (t instanceof ByteType) {
      lo = Byte.MIN_VALUE;
      hi = Byte.MAX_VALUE;
    } else if (t instanceof ShortType) {
      lo = Short.MIN_VALUE;
      hi = Short.MAX_VALUE;
    } else if (t instanceof IntegerType) {
      lo = Integer.MIN_VALUE;
      hi = Integer.MAX_VALUE;
    } else if (t instanceof LongType) {
      lo = Long.MIN_VALUE;
      hi = Long.MAX_VALUE;
    } else {
      throw new IllegalArgumentException("hdp_spark: a key list for a grouping column of type "
          + t.simpleString() + " is not supported by the Column aggregators; use the release "
          + "API, hdp_spark.spark.agg(df, ..., by=..., keys=[...])");
    }
    BigInteger b;
    if (integral) {
      b = big(n);
    } else {
      double d = n.doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d) || d != Math.rint(d)) {
        throw refuse(value, group);
      }
      b = new java.math.BigDecimal(d).toBigIntegerExact();
    }
    if (b.compareTo(BigInteger.valueOf(lo)) < 0 || b.compareTo(BigInteger.valueOf(hi)) > 0) {
      throw refuse(value, group);
    }
    long v = b.longValue();
    if (t instanceof ByteType) {
      return Literal.create((byte) v, t);
    }
    if (t instanceof ShortType) {
      return Literal.create((short) v, t);
    }
    if (t instanceof IntegerType) {
      return Literal.create((int) v, t);
    }
    return Literal.create(v, t);
  }

  private static BigInteger big(Number n) {
    return n instanceof BigInteger ? (BigInteger) n : BigInteger.valueOf(n.longValue());
  }
}
