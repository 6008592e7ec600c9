package org.hdpspark;

import java.util.List;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;

import scala.Option;
import scala.collection.immutable.Seq;

/**
 * The call of a Python finalize that {@code hdp_spark.spark.register_sql(spark)} registered
 * on the active session (a temporary function, which holds the release key), over the native
 * aggregate and the SQL function's public arguments.
 */
final class SqlFinalize {

  private SqlFinalize() {}

  /** The column name of an argument as the release API's spec would name it. */
  static String name(Expression e) {
    return e instanceof NamedExpression ? ((NamedExpression) e).name() : e.sql();
  }

  /** The options as the finalize's last two arguments: the method ('' for the default) and
   * beta (NaN for the default). */
  static void addOptions(List<Expression> fin, SqlOptions options) {
    fin.add(org.apache.spark.sql.catalyst.expressions.Literal.create(
        org.apache.spark.unsafe.types.UTF8String.fromString(options.method),
        org.apache.spark.sql.types.DataTypes.StringType));
    fin.add(org.apache.spark.sql.catalyst.expressions.Literal.create(options.beta,
        org.apache.spark.sql.types.DataTypes.DoubleType));
  }

  /**
   * {@code expr} named as Spark names its own functions' columns: the SQL function and the
   * arguments as written ({@code hdp_mean(salary, eps, 0, 250000)}, like {@code avg(salary)}),
   * not the internal finalize over the native aggregate. An alias the user writes replaces it
   * (Spark drops inner aliases), and inside a larger expression Spark removes it.
   */
  static Expression named(String function, List<Expression> written, Expression expr) {
    org.apache.spark.sql.catalyst.util.package$ util =
        org.apache.spark.sql.catalyst.util.package$.MODULE$;
    StringBuilder name = new StringBuilder(function).append('(');
    for (int i = 0; i < written.size(); i++) {
      name.append(i == 0 ? "" : ", ")
          .append(util.toPrettySQL(written.get(i), util.toPrettySQL$default$2()));
    }
    String text = name.append(')').toString();
    Seq<String> none = scala.jdk.javaapi.CollectionConverters.asScala(
        new java.util.ArrayList<String>()).toList();
    return new org.apache.spark.sql.catalyst.expressions.Alias(expr, text,
        NamedExpression.newExprId(), none, Option.empty(), none);
  }

  /**
   * The released value of a SQL call: its finalize over {@code fin}, or, under partition
   * selection, the {@link HdpSelected} pair of the selection's finalize
   * ({@code <finalize>_select}) and the statistics' ({@code <finalize>_selected}, reading the
   * selection's weight and the number of aggregators), each also given the decision.
   */
  static Expression release(String function, String finalize, List<Expression> fin,
      SqlOptions options) {
    if (!options.selected()) {
      return call(function, finalize, fin);
    }
    Expression decision = org.apache.spark.sql.catalyst.expressions.Literal.create(
        org.apache.spark.unsafe.types.UTF8String.fromString(options.query.groups),
        org.apache.spark.sql.types.DataTypes.StringType);
    List<Expression> select = new java.util.ArrayList<>(fin);
    select.add(decision);
    List<Expression> value = new java.util.ArrayList<>(fin);
    value.add(new HdpSelection(HdpSelection.WEIGHT));
    value.add(new HdpSelection(HdpSelection.PARTS));
    value.add(decision);
    return new HdpSelected(call(function, finalize + "_selected", value),
        call(function, finalize + "_select", select));
  }

  static Expression call(String function, String finalize, List<Expression> args) {
    org.apache.spark.sql.classic.SparkSession session =
        (org.apache.spark.sql.classic.SparkSession) org.apache.spark.sql.classic.SparkSession.active();
    Seq<Expression> finArgs = HdpCells.seq(args);
    for (FunctionIdentifier id : new FunctionIdentifier[] {
        new FunctionIdentifier(finalize, Option.apply("session"), Option.apply("system")),
        new FunctionIdentifier(finalize, Option.empty(), Option.empty())}) {
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
    throw new IllegalStateException(function + " in SQL needs its finalize: call "
        + "hdp_spark.spark.register_sql(spark) on this session first");
  }
}
