package org.hdpspark;

import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;

/**
 * The optional trailing arguments of the SQL functions, after the required ones:
 * {@code [, method [, beta]] [, 'public' | 'select', delta, c, share]}, e.g. {@code
 * hdp_mean(salary, eps, 0, 250000, 'adpm', 0.1, 'public')} or {@code hdp_mean(spend, eps, 0,
 * 500, 'select', 1e-7, 1.0, 0.4)} (partition selection: select_keys(delta=, c=, share=)). Checked when the query is analyzed, with the release API's words:
 * the method against the names {@code hdp_spark.spark.register_sql} put in the session
 * conf, beta in (0, 1). An empty method and a NaN beta stand for the defaults.
 */
final class SqlOptions {

  static final String SELECT = "select";

  final HdpQuery query;
  final String method;
  final double beta;

  private SqlOptions(HdpQuery query, String method, double beta) {
    this.query = query;
    this.method = method;
    this.beta = beta;
  }

  /** Whether the call releases under partition selection ({@code 'select', δ, c, f}). */
  boolean selected() {
    return query.groups.startsWith(SelectionPlan.PREFIX);
  }

  /** A constant number argument, checked: {@code lo < v < hi} ({@code hi} may be +inf). */
  private static double number(Expression e, String name, double lo, double hi, String rule) {
    if (!e.foldable() || !(e.dataType() instanceof NumericType) || e.eval(null) == null) {
      throw new IllegalArgumentException("ParameterError: `" + name + "` must be a number "
          + rule + ", got " + e.sql() + ".");
    }
    double v = HdpCells.real(e.eval(null));
    if (!(v > lo && v < hi)) {
      throw new IllegalArgumentException("ParameterError: `" + name + "` must be " + rule
          + ", got " + e.sql() + ".");
    }
    return v;
  }

  /** The group decision of {@code 'select', delta, c, share} (select_keys' parameters, the
   * default step and neighbours), as the Python Column writes it. */
  private static HdpQuery selection(List<Expression> in, int at) {
    double delta = number(in.get(at + 1), "delta", 0, 1, "in (0, 1)");
    double c = number(in.get(at + 2), "c", 0, Double.POSITIVE_INFINITY, "finite and > 0");
    double share = number(in.get(at + 3), "share", 0, 1, "in (0, 1)");
    return new HdpQuery(SelectionPlan.PREFIX + "{\"c\": " + c + ", \"delta\": " + delta
        + ", \"neighbours\": \"replace\", \"share\": " + share + ", \"step\": null}");
  }

  static SqlOptions parse(List<Expression> in, int required, String function, String conf) {
    int n = in.size();
    HdpQuery query = new HdpQuery(HdpQuery.NONE);
    if (n > required && isText(in.get(n - 1))
        && HdpQuery.PUBLIC.equals(HdpQueryRule.constantText(in.get(n - 1), "groups"))) {
      query = new HdpQuery(HdpQuery.PUBLIC);
      n--;
    } else if (n >= required + 4 && isText(in.get(n - 4))
        && SELECT.equals(HdpQueryRule.constantText(in.get(n - 4), "groups"))) {
      query = selection(in, n - 4);
      n -= 4;
    }
    if (n - required > 2) {
      throw new IllegalArgumentException(function + " takes at most a method, a beta and "
          + "'public' (or 'select', delta, c, share) after its " + required + " arguments, got "
          + in.size() + " arguments");
    }
    String method = "";
    double beta = Double.NaN;
    if (n > required) {
      Expression m = in.get(required);
      if (!isText(m)) {
        throw new IllegalArgumentException("ParameterError: `method` must be a constant "
            + "string (or the last argument 'public'), got " + m.sql() + ".");
      }
      method = HdpQueryRule.constantText(m, "method");
      String known = org.apache.spark.sql.internal.SQLConf.get().getConfString(conf, "");
      if (!known.isEmpty() && !Arrays.asList(known.split(",")).contains(method)) {
        throw new IllegalArgumentException("ParameterError: `method` must be one of "
            + known.replace(",", ", ") + "; got '" + method + "' (a last argument 'public' "
            + "declares the grouping values public).");
      }
    }
    if (n > required + 1) {
      Expression b = in.get(required + 1);
      if (!b.foldable() || !(b.dataType() instanceof NumericType) || b.eval(null) == null) {
        throw new IllegalArgumentException("ParameterError: `beta` must be a number in (0, 1), "
            + "got " + b.sql() + ".");
      }
      beta = HdpCells.real(b.eval(null));
      if (!(beta > 0 && beta < 1)) {
        throw new IllegalArgumentException("ParameterError: `beta` must be in (0, 1), got "
            + b.sql() + ".");
      }
    }
    return new SqlOptions(query, method, beta);
  }

  private static boolean isText(Expression e) {
    return e.foldable() && e.dataType() instanceof StringType;
  }
}
