package org.hdpspark;

import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

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
    List<Expression> unit = null;  // 'unit', column, max_groups, max_rows (UnitPlan)
    if (n >= required + 4 && isText(in.get(n - 4))
        && UNIT.equals(HdpQueryRule.constantText(in.get(n - 4), "groups"))) {
      unit = in.subList(n - 4, n);
      n -= 4;
    }
    SqlOptions options = parse(in.subList(0, n), required, function, conf, in.size());
    if (unit == null) {
      return options;
    }
    // 'select', δ, c, f with 'unit': select_keys under the unit (its c and share take the
    // places of eps_cap and weight_share; the threshold's margin for δ/max_groups)
    HdpQuery query = new HdpQuery(unitDecision(unit,
        HdpQuery.PUBLIC.equals(options.query.groups),
        options.selected() ? options.query.groups : null));
    return new SqlOptions(query, options.method, options.beta);
  }

  static final String UNIT = "unit";
  /** The session conf where register_sql writes the privacy unit's public defaults and
   * the registration's bounding key ({@code hdp_spark.spark.sql_functions}). */
  static final String UNIT_CONF = "hdp_spark.sql.unit";

  /** The group decision of {@code 'unit', column, max_groups, max_rows} (as the Python
   * Column writes it: column_unit.unit_decision), with the registration's bounding key;
   * with {@code selection} ('select', δ, c, f) the selection's parameters instead of the
   * unit's defaults, {@code keys_public} false (column_unit._select_decision). */
  private static String unitDecision(List<Expression> unit, boolean declared,
      String selection) {
    String column = HdpQueryRule.constantText(unit.get(1), "privacy_unit");
    int groups = bound(unit.get(2), "max_groups", 10_000);
    int rows = bound(unit.get(3), "max_rows", 1_000_000);
    String conf = org.apache.spark.sql.internal.SQLConf.get().getConfString(UNIT_CONF, "");
    if (conf.isEmpty()) {
      throw new IllegalStateException("hdp_mean with 'unit' in SQL needs "
          + "hdp_spark.spark.register_sql(spark) on this session first");
    }
    try {
      com.fasterxml.jackson.databind.ObjectMapper json =
          new com.fasterxml.jackson.databind.ObjectMapper();
      com.fasterxml.jackson.databind.node.ObjectNode d =
          (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(conf);
      String bkey = d.remove("bkey").asText();
      if (selection != null) {  // the selection's parameters, no public keys
        d = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(
            selection.substring(SelectionPlan.PREFIX.length()));
        d.put("keys_public", false);
      }
      d.put("max_groups", groups);
      d.put("max_rows", rows);
      d.put("public", declared);
      d.put("unit", column);
      return SelectionPlan.PREFIX + json.writeValueAsString(d) + "#" + bkey;
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static int bound(Expression e, String name, int limit) {
    Object v = e.foldable() ? e.eval(null) : null;
    if (!(v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte)
        || ((Number) v).longValue() < 1 || ((Number) v).longValue() > limit) {
      throw new IllegalArgumentException("ParameterError: `" + name + "` must be an int in "
          + "[1, " + limit + "], got " + e.sql() + ".");
    }
    return ((Number) v).intValue();
  }

  private static SqlOptions parse(List<Expression> in, int required, String function,
      String conf, int written) {
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
          + "'public' (or 'select', delta, c, share) after its " + required + " arguments, "
          + "then 'unit', column, max_groups, max_rows, got " + written + " arguments");
    }
    String method = "";
    double beta = Double.NaN;
    if (n > required) {
      Expression m = in.get(required);
      if (!isText(m)) {
        throw new IllegalArgumentException("ParameterError: `method` (argument "
            + (required + 1) + " of " + function + ") must be a constant string, got "
            + m.sql() + ".");
      }
      method = HdpQueryRule.constantText(m, "method");
      String known = org.apache.spark.sql.internal.SQLConf.get().getConfString(conf, "");
      if (!known.isEmpty() && !Arrays.asList(known.split(",")).contains(method)) {
        throw new IllegalArgumentException("ParameterError: `method` must be one of "
            + known.replace(",", ", ") + "; got '" + method + "'" + hint(method, known)
            + ".");
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

  /** A hint about what an unknown method text was probably meant to be: the closest of the
   * method names and the group decisions ('public', 'select') within a small edit distance
   * of what the call wrote, or nothing (the call is not told about arguments it lacks). */
  /** The JSON object of a constant options string, or null when it is not one. */
  static JsonNode jsonObject(String text) {
    JsonNode json;
    try {
      json = new ObjectMapper().readTree(text);
    } catch (Exception e) {
      return null;
    }
    return json != null && json.isObject() ? json : null;
  }

  static String hint(String typed, String known) {
    List<String> choices = new java.util.ArrayList<>(Arrays.asList(known.split(",")));
    choices.add(HdpQuery.PUBLIC);
    choices.add(SELECT);
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    String lower = typed.toLowerCase(java.util.Locale.ROOT);
    for (String choice : choices) {
      int d = distance(lower, choice);
      if (d < bestDistance) {
        best = choice;
        bestDistance = d;
      }
    }
    if (best == null || bestDistance > Math.max(1, best.length() / 3)) {
      return "";
    }
    if (best.equals(HdpQuery.PUBLIC)) {
      return " (did you mean 'public'? As the last argument it declares the grouping values "
          + "public)";
    }
    if (best.equals(SELECT)) {
      return " (did you mean 'select', delta, c, share? They select the groups privately)";
    }
    return " (did you mean '" + best + "'?)";
  }

  /** Edit distance of two short texts (insertions, deletions, substitutions and swaps of
   * neighbours count 1: optimal string alignment). */
  private static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int swap = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + swap);
        if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  private static boolean isText(Expression e) {
    return e.foldable() && e.dataType() instanceof StringType;
  }
}
