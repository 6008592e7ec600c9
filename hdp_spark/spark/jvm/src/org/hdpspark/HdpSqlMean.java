package org.hdpspark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL function {@code hdp_mean(value, eps, lower, upper[, method[, beta]][, groups])}
 * (see {@link SqlOptions}; the group decision 'public' declares the grouping values
 * public, 'select', delta, c, share selects them privately, without one a grouped query is
 * refused): the native {@link HdpCells}
 * aggregate wrapped in the Python finalize that {@code hdp_spark.spark.register_sql(spark)}
 * registers as {@code hdp_mean_finalize} (which holds the release key).
 *
 * <p>The level-rule constants below are hdp_spark's public constants (invalid level, below-grid
 * level, epsilon floor, epsilon cap, fixed-point one); the Python Column path passes the same
 * values from hdp_spark.core, and a test checks that SQL and Columns release the same numbers.
 */
final class HdpSqlMean extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  static final String FUNCTION = "hdp_mean";
  static final String FINALIZE = "hdp_mean_finalize";
  /** The session conf where register_sql lists the mean's method names. */
  static final String METHODS_CONF = "hdp_spark.sql.meanMethods";
  static final double[] RULES = {-1.0, -2.0, 1e-100, 1e100, 2147483648.0};

  /** The level rules as the constant array {@code hdp_cells} takes. */
  static Literal rules() {
    Object[] rules = new Object[RULES.length];
    for (int i = 0; i < RULES.length; i++) {
      rules[i] = RULES[i];
    }
    return Literal.create(new GenericArrayData(rules),
        DataTypes.createArrayType(DataTypes.DoubleType, false));
  }

  /**
   * The release API's bound rules (hdp_spark.core.mean.spec.check_bounds), checked when the
   * query is analyzed so that a bad call fails before any job runs, in the same words.
   */
  static void checkBounds(double lo, double hi, String lowerSql, String upperSql) {
    String got = " got (" + lowerSql + ", " + upperSql + ").";
    if (Double.isNaN(lo) || Double.isInfinite(lo) || Double.isNaN(hi) || Double.isInfinite(hi)) {
      throw new IllegalArgumentException("ParameterError: `lower` and `upper` must be finite,"
          + got);
    }
    if (!(lo < hi)) {
      throw new IllegalArgumentException("ParameterError: `lower` must be < `upper`," + got);
    }
    if (Double.isInfinite(hi - lo)) {
      throw new IllegalArgumentException("ParameterError: `upper - lower` must be a finite "
          + "float; the bounds are too far apart," + got);
    }
    if (Double.isInfinite(hi + lo)) {
      throw new IllegalArgumentException("ParameterError: `lower + upper` must be a finite "
          + "float (the midpoint (lower + upper) / 2 is the default fill); the bounds are too "
          + "large," + got);
    }
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    if (in.size() < 4) {
      throw new IllegalArgumentException("hdp_mean takes (value, eps, lower, upper[, method[, "
          + "beta]][, 'public' | 'select', delta, c, share]), got " + in.size()
          + " arguments");
    }
    SqlOptions options = SqlOptions.parse(in, 4, "hdp_mean", METHODS_CONF);
    HdpQuery query = options.query;
    Expression x = in.get(0);
    Expression eps = in.get(1);
    Expression lower = in.get(2);
    Expression upper = in.get(3);
    if (!lower.foldable() || !upper.foldable()) {
      throw new IllegalArgumentException("hdp_mean: `lower` and `upper` must be constants");
    }
    double lo = HdpCells.real(lower.eval(null));
    double hi = HdpCells.real(upper.eval(null));
    checkBounds(lo, hi, lower.sql(), upper.sql());
    List<Expression> cells = new ArrayList<>();
    cells.add(eps);
    cells.add(Literal.create(0, DataTypes.IntegerType));
    cells.add(rules());
    cells.add(Literal.create(null, DataTypes.createArrayType(DataTypes.DoubleType, false)));
    cells.add(new HdpGroup());
    cells.add(Literal.create(null, DataTypes.createArrayType(DataTypes.StringType, false)));
    cells.add(query);
    cells.add(x);
    cells.add(Literal.create(lo, DataTypes.DoubleType));
    cells.add(Literal.create(hi, DataTypes.DoubleType));
    cells.add(Literal.create((lo + hi) / 2, DataTypes.DoubleType));  // the default fill
    Expression agg = new HdpCells(HdpCells.seq(cells), 0, 0).toAggregateExpression();
    List<Expression> fin = new ArrayList<>();
    fin.add(agg);
    fin.add(Literal.create(UTF8String.fromString(SqlFinalize.name(x)), DataTypes.StringType));
    fin.add(Literal.create(UTF8String.fromString(SqlFinalize.name(eps)), DataTypes.StringType));
    fin.add(lower);  // as written: an integer bound stays an integer, as in the Python spec
    fin.add(upper);
    SqlFinalize.addOptions(fin, options);
    return SqlFinalize.named(FUNCTION, in, SqlFinalize.release(FUNCTION, FINALIZE, fin, options));
  }
}
