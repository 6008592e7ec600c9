package org.hdpspark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL function {@code hdp_mean(value, eps, lower, upper)}: the native {@link HdpCells}
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
  private static final double[] RULES = {-1.0, -2.0, 1e-100, 1e100, 2147483648.0};

  private static String name(Expression e) {
    return e instanceof NamedExpression ? ((NamedExpression) e).name() : e.sql();
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    if (in.size() != 4) {
      throw new IllegalArgumentException(
          "hdp_mean takes (value, eps, lower, upper), got " + in.size() + " arguments");
    }
    Expression x = in.get(0);
    Expression eps = in.get(1);
    Expression lower = in.get(2);
    Expression upper = in.get(3);
    if (!lower.foldable() || !upper.foldable()) {
      throw new IllegalArgumentException("hdp_mean: `lower` and `upper` must be constants");
    }
    double lo = HdpCells.real(lower.eval(null));
    double hi = HdpCells.real(upper.eval(null));
    Object[] rules = new Object[RULES.length];
    for (int i = 0; i < RULES.length; i++) {
      rules[i] = RULES[i];
    }
    List<Expression> cells = new ArrayList<>();
    cells.add(eps);
    cells.add(Literal.create(0, DataTypes.IntegerType));
    cells.add(Literal.create(new GenericArrayData(rules),
        DataTypes.createArrayType(DataTypes.DoubleType, false)));
    cells.add(Literal.create(null, DataTypes.createArrayType(DataTypes.DoubleType, false)));
    cells.add(new HdpGroup());
    cells.add(Literal.create(null, DataTypes.createArrayType(DataTypes.StringType, false)));
    cells.add(x);
    cells.add(Literal.create(lo, DataTypes.DoubleType));
    cells.add(Literal.create(hi, DataTypes.DoubleType));
    cells.add(Literal.create((lo + hi) / 2, DataTypes.DoubleType));  // the default fill
    Expression agg = new HdpCells(HdpCells.seq(cells), 0, 0).toAggregateExpression();
    List<Expression> fin = new ArrayList<>();
    fin.add(agg);
    fin.add(Literal.create(UTF8String.fromString(name(x)), DataTypes.StringType));
    fin.add(Literal.create(UTF8String.fromString(name(eps)), DataTypes.StringType));
    fin.add(lower);  // as written: an integer bound stays an integer, as in the Python spec
    fin.add(upper);
    org.apache.spark.sql.classic.SparkSession session =
        (org.apache.spark.sql.classic.SparkSession) org.apache.spark.sql.classic.SparkSession.active();
    Seq<Expression> finArgs = HdpCells.seq(fin);
    for (FunctionIdentifier id : new FunctionIdentifier[] {
        new FunctionIdentifier(FINALIZE, Option.apply("session"), Option.apply("system")),
        new FunctionIdentifier(FINALIZE, Option.empty(), Option.empty())}) {
      boolean exists;
      try {
        exists = session.sessionState().functionRegistry().functionExists(id);
      } catch (AssertionError e) {  // this Spark wants qualified names only
        continue;
      }
      if (exists) {
        try {
          return session.sessionState().functionRegistry().lookupFunction(id, finArgs);
        } catch (Exception e) {  // AnalysisException is checked in Java
          throw new IllegalStateException(e.getMessage(), e);
        }
      }
    }
    throw new IllegalStateException("hdp_mean in SQL needs its finalize: call "
        + "hdp_spark.spark.register_sql(spark) on this session first");
  }
}
