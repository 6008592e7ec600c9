package org.hdpspark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL function {@code hdp_histogram(category, eps, array(...)[, method[, beta]][,
 * groups])} (see {@link SqlOptions}: 'public' or 'select', delta, c, share): the native
 * {@link HdpCells} aggregate over the public domain {@code array(...)} (strings, or integers)
 * wrapped in the Python finalize {@code hdp_histogram_finalize_str} or
 * {@code hdp_histogram_finalize_int} that {@code hdp_spark.spark.register_sql(spark)}
 * registers (the struct's bins hold string or integer labels).
 */
final class HdpSqlHistogram extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  static final String FUNCTION = "hdp_histogram";
  static final String FINALIZE = "hdp_histogram_finalize_";
  /** The session conf where register_sql lists the histogram's method names. */
  static final String METHODS_CONF = "hdp_spark.sql.histogramMethods";

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    if (in.size() < 3) {
      throw new IllegalArgumentException("hdp_histogram takes (category, eps, categories[, "
          + "method[, beta]][, 'public' | 'select', delta, c, share]), got " + in.size()
          + " arguments");
    }
    SqlOptions options = SqlOptions.parse(in, 3, "hdp_histogram", METHODS_CONF);
    HdpQuery query = options.query;
    Expression category = in.get(0);
    Expression eps = in.get(1);
    Literal domain = domain(in.get(2));
    boolean text = ((ArrayType) domain.dataType()).elementType() instanceof StringType;
    List<Expression> cells = new ArrayList<>();
    cells.add(eps);
    cells.add(category);
    cells.add(HdpSqlMean.rules());
    cells.add(Literal.create(null, DataTypes.createArrayType(DataTypes.DoubleType, false)));
    cells.add(new HdpGroup());
    cells.add(domain);
    cells.add(query);
    Expression agg = new HdpCells(HdpCells.seq(cells), 0, 0).toAggregateExpression();
    List<Expression> fin = new ArrayList<>();
    fin.add(agg);
    fin.add(Literal.create(UTF8String.fromString(SqlFinalize.name(category)),
        DataTypes.StringType));
    fin.add(Literal.create(UTF8String.fromString(SqlFinalize.name(eps)), DataTypes.StringType));
    fin.add(domain);
    SqlFinalize.addOptions(fin, options);
    return SqlFinalize.named(FUNCTION, in,
        SqlFinalize.release(FUNCTION, FINALIZE + (text ? "str" : "int"), fin, options));
  }

  /**
   * The public domain as a constant array of strings or of bigints (what {@code hdp_cells}
   * matches against), from a constant array of strings or of integers with no null and no
   * repeated label.
   */
  static Literal domain(Expression e) {
    DataType t = e.dataType();
    if (!e.foldable() || !(t instanceof ArrayType)) {
      throw new IllegalArgumentException("hdp_histogram: `categories` must be a constant array "
          + "of strings or integers, e.g. array('north', 'south'); got " + e.sql());
    }
    DataType et = ((ArrayType) t).elementType();
    boolean text = et instanceof StringType;
    boolean integral = et instanceof ByteType || et instanceof ShortType
        || et instanceof IntegerType || et instanceof LongType;
    if (!text && !integral) {
      throw new IllegalArgumentException("hdp_histogram: `categories` must hold strings or "
          + "integers, got " + t.simpleString());
    }
    ArrayData a = (ArrayData) e.eval(null);
    if (a == null || a.numElements() == 0) {
      throw new IllegalArgumentException("hdp_histogram: `categories` must not be empty");
    }
    Object[] out = new Object[a.numElements()];
    Set<Object> seen = new HashSet<>();
    for (int i = 0; i < out.length; i++) {
      if (a.isNullAt(i)) {
        throw new IllegalArgumentException("hdp_histogram: `categories` must not hold null");
      }
      out[i] = text ? a.getUTF8String(i).clone() : (Object) ((Number) a.get(i, et)).longValue();
      if (!seen.add(out[i])) {
        throw new IllegalArgumentException("hdp_histogram: `categories` must not repeat a "
            + "label; got " + e.sql());
      }
    }
    return Literal.create(new GenericArrayData(out),
        DataTypes.createArrayType(text ? DataTypes.StringType : DataTypes.LongType, false));
  }
}
