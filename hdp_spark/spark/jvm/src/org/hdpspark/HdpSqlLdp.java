package org.hdpspark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL form of the scalar local-DP aggregators: {@code hdp_ldp_mean(report, eps, '<JSON
 * options>'[, 'public'])} and {@code hdp_ldp_distribution(index, sign, eps, '<JSON
 * options>'[, 'public'])}, the options being the release API's keywords as a JSON object
 * ({@code '{"mechanism": "laplace", "lower": 5, "upper": 15}'}, {@code '{"oracle": {"d": 8,
 * "m": 64, "phi_seed": 1}}'}) plus {@code already_randomized}; and
 * {@code hdp_ldp_mean_vector(report, eps, '<JSON options>'[, 'public'])} ({@code '{"d": 40,
 * "radius": 2}'}), whose per-row encoding is one {@code transform} over the report array
 * with the constant A_d of the dimension, read from the table register_sql put beside the
 * templates (computed once in Python; {@code d} above the table's size is refused).
 *
 * <p>The native {@link HdpLdpCells} aggregate of the Column is built over the release API's
 * per-row SQL templates ({@link SqlTemplate}; {@code hdp_spark.spark.ldp_inputs}), which
 * read from the options only the bounds (mean) or the oracle's row count {@code m}
 * (distribution); the report marker is checked by the aggregate at analysis, as for the
 * Column. The finalize, {@code hdp_ldp_<kind>_finalize}, builds the spec from the same JSON
 * with the release API's constructor, refuses the call unless the constants the JVM used
 * are the spec's, and runs the Column's finalize (no noise: the reports carry it).
 */
final class HdpSqlLdp extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  /** function, kind, its column arguments. */
  static final String[][] FUNCTIONS = {
      {"hdp_ldp_mean", "mean", "report, eps"},
      {"hdp_ldp_distribution", "distribution", "index, sign, eps"},
      {"hdp_ldp_mean_vector", "vector", "report, eps"}};
  /** The session conf where register_sql puts the templates (a JSON object per kind). */
  static final String ROWS_CONF = "hdp_spark.sql.ldpRows";

  private final String function;
  private final String kind;
  private final String[] columns;

  /** Per session (its SQLConf object, which the analyzer's {@code SQLConf.get()} returns on
   * classic Spark and Spark Connect alike; weakly held), the registration's secret key for
   * {@code 'unit'} (64 hex digits): set by {@link HdpExtensions#registerLdpUnitKey}. Not
   * the conf's settings: a Java map that nothing prints. */
  private static final Map<org.apache.spark.sql.internal.SQLConf, String> UNIT_KEYS =
      java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

  static void unitKey(org.apache.spark.sql.internal.SQLConf conf, String secret) {
    UNIT_KEYS.put(conf, secret);
  }

  HdpSqlLdp(String function, String kind, String columns) {
    this.function = function;
    this.kind = kind;
    this.columns = columns.split(", ");
  }

  private IllegalArgumentException bad(String text) {
    return new IllegalArgumentException("ParameterError: " + text);
  }

  private static boolean isText(Expression e) {
    return e.foldable() && e.dataType() instanceof StringType && e.eval(null) != null;
  }

  private double number(JsonNode json, String name, double fallback) {
    JsonNode v = json.get(name);
    if (v == null || v.isNull()) {
      return fallback;
    }
    if (!v.isNumber()) {
      throw bad("`" + name + "` (in the options of " + function + ") must be a number, got "
          + v + ".");
    }
    return v.asDouble();
  }

  /** The id column of {@code 'unit', column, max_groups, max_rows}; the bounds must be 1
   * (the Column's words). */
  private String unitColumn(List<Expression> tail) {
    Expression c = tail.get(1);
    if (!isText(c) || c.eval(null).toString().isEmpty()) {
      throw bad("`privacy_unit` (after 'unit' in " + function + ") must be a constant "
          + "string naming the id column, got " + c.sql() + ".");
    }
    String[] names = {"max_groups", "max_rows"};
    for (int i = 0; i < 2; i++) {
      Expression b = tail.get(2 + i);
      Object v = b.foldable() ? b.eval(null) : null;
      if (!(v instanceof Integer || v instanceof Long || v instanceof Short
          || v instanceof Byte) || ((Number) v).longValue() != 1) {
        throw bad("`" + names[i] + "` must be 1 for local-DP aggregators under "
            + "`privacy_unit` (they keep one report per person), got " + b.sql() + ".");
      }
    }
    return c.eval(null).toString();
  }

  /** The spec's name, which the rank reads: the {@code alias} option, else the release
   * API's default ({@code <report>_mean}, {@code <index>_pmf}); the finalize refuses the
   * call unless it is its spec's. */
  private String aggregatorName(JsonNode json, Expression first) {
    JsonNode alias = json.get("alias");
    if (alias != null && alias.isTextual()) {
      return alias.asText();
    }
    return SqlFinalize.name(first) + ("distribution".equals(kind) ? "_pmf" : "_mean");
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    int k = columns.length;
    String shape = function + "(" + String.join(", ", columns)
        + ", '<JSON options>'[, 'public' | 'unit', column, 1, 1])";
    int n = in.size();
    String unit = null;  // 'unit', column, max_groups, max_rows: one report per person
    if (n >= k + 5 && isText(in.get(n - 4))
        && SqlOptions.UNIT.equals(in.get(n - 4).eval(null).toString())) {
      unit = unitColumn(in.subList(n - 4, n));
      n -= 4;
      for (int i = 0; i < k; i++) {  // check_id_unread's rule and words
        if (unit.equals(SqlFinalize.name(in.get(i)))) {
          throw bad("`privacy_unit` column '" + unit + "' identifies people: no aggregator "
              + "may read it as a report or ε column.");
        }
      }
    }
    String groups = HdpQuery.NONE;
    if (n == k + 2) {
      Expression last = in.get(k + 1);
      if (!isText(last) || !HdpQuery.PUBLIC.equals(last.eval(null).toString())) {
        throw bad("the last argument of " + shape + " must be 'public' or omitted, got "
            + last.sql() + ".");
      }
      if (unit != null) {
        throw bad("`keys`: local-DP aggregators under `privacy_unit` release the whole "
            + "table only (a report cannot be split over groups, and a person's group "
            + "membership is private): drop 'public' before 'unit', got 'public'.");
      }
      groups = HdpQuery.PUBLIC;
    } else if (n != k + 1) {
      throw new IllegalArgumentException(function + " takes " + shape + ", got " + in.size()
          + " arguments");
    }
    Expression options = in.get(k);
    if (!isText(options)) {
      throw bad("`options` (argument " + (k + 1) + " of " + function + ") must be a constant "
          + "JSON object string, got " + options.sql() + ".");
    }
    String text = options.eval(null).toString();
    JsonNode json = SqlOptions.jsonObject(text);
    if (json == null) {
      throw bad("`options` of " + function + " must be a JSON object such as "
          + ("mean".equals(kind) ? "'{\"mechanism\": \"laplace\", \"lower\": 0, \"upper\": 1}'"
              : "vector".equals(kind) ? "'{\"d\": 3, \"radius\": 1}'"
              : "'{\"oracle\": {\"d\": 8, \"m\": 64, \"phi_seed\": 1}}'") + ", got " + text
          + ".");
    }
    JsonNode declared = json.get("already_randomized");
    if (declared != null && !declared.isBoolean()) {
      throw bad("`already_randomized` (in the options of " + function + ") must be true or "
          + "false, got " + declared + ".");
    }
    JsonNode conf = SqlTemplate.conf(ROWS_CONF, function);
    Map<String, Expression> names = new HashMap<>();
    for (int i = 0; i < k; i++) {
      names.put("__hdp_" + columns[i], in.get(i));
    }
    ObjectNode used = JsonNodeFactory.instance.objectNode();
    String template;
    if ("mean".equals(kind)) {
      JsonNode m = json.get("mechanism");
      if (m == null || !m.isTextual() || !("laplace".equals(m.asText())
          || "rr".equals(m.asText()))) {
        throw bad("`mechanism` (in the options of " + function + ") must be \"laplace\" or "
            + "\"rr\", got " + m + ".");
      }
      template = "mean:" + m.asText();
      double lo = number(json, "lower", -1.0);
      double hi = number(json, "upper", 1.0);
      names.put("__hdp_lower", Literal.create(lo, DataTypes.DoubleType));
      names.put("__hdp_upper", Literal.create(hi, DataTypes.DoubleType));
      used.put("lower", lo).put("upper", hi);
    } else if ("vector".equals(kind)) {
      JsonNode spheres = conf.get("sphere");
      int most = spheres == null ? 0 : spheres.size();
      JsonNode d = json.get("d");
      if (d == null || !d.isIntegralNumber() || !d.canConvertToInt() || d.asInt() < 1
          || d.asInt() > most) {
        throw bad("`d` (in the options of " + function + ") must be an integer from 1 to "
            + most + " in SQL (the Column hs.ldp_mean_vector takes larger ones), got " + d
            + ".");
      }
      template = kind;
      double radius = number(json, "radius", 1.0);
      double sphere = spheres.get(d.asInt() - 1).asDouble();
      names.put("__hdp_d", Literal.create(d.asInt(), DataTypes.IntegerType));
      names.put("__hdp_radius", Literal.create(radius, DataTypes.DoubleType));
      names.put("__hdp_sphere", Literal.create(sphere, DataTypes.DoubleType));
      used.put("d", d.asInt()).put("radius", radius).put("sphere", sphere);
    } else {
      JsonNode oracle = json.get("oracle");
      JsonNode m = oracle == null || !oracle.isObject() ? null : oracle.get("m");
      if (m == null || !m.isIntegralNumber() || !m.canConvertToLong() || m.asLong() < 1) {
        throw bad("`oracle` (in the options of " + function + ") must be an object of the "
            + "FrequencyOracle's fields with an integer `m` >= 1 ({\"d\": ..., \"m\": ..., "
            + "\"phi_seed\": ...}).");
      }
      template = kind;
      names.put("__hdp_m", Literal.create((double) m.asLong(), DataTypes.DoubleType));
      used.put("m", m.asLong());
    }
    JsonNode rows = conf.get(template);
    if (rows == null) {
      throw new IllegalStateException(function + " in SQL needs its finalize: call "
          + "hdp_spark.spark.register_sql(spark) on this session first");
    }
    List<Expression> kids = new ArrayList<>();
    kids.add(new HdpGroup());  // HdpLdpCells.GROUP, then HdpLdpCells.QUERY
    String secret = unit == null ? null
        : UNIT_KEYS.get(org.apache.spark.sql.internal.SQLConf.get());
    if (unit != null) {  // the rule of LdpUnitPlan, under the registration's secret key
      if (secret == null) {
        throw new IllegalStateException(function + " with 'unit' in SQL needs its secret "
            + "key: call hdp_spark.spark.register_sql(spark) on this session first (on Spark "
            + "Connect the server also needs the plugin " + HdpConnectSecret.class.getName()
            + " in spark.connect.extensions.expression.classes, as hdp_spark.spark.configure "
            + "sets)");
      }
      String name = aggregatorName(json, in.get(0));
      used.put("name", name);
      ObjectNode d = JsonNodeFactory.instance.objectNode();
      d.put("name", name).put("unit", unit);  // keys sorted: the Column's decision text
      groups = LdpUnitPlan.PREFIX + d.toString();
    }
    kids.add(new HdpQuery(groups, secret));
    kids.add(SqlTemplate.expr(rows.get("level").asText(), names));
    kids.add(SqlTemplate.expr(rows.get("index").asText(), names));
    kids.add(SqlTemplate.expr(rows.get("q").asText(), names));
    kids.add(Literal.create(UTF8String.fromString(rows.get("mechanism").asText()),
        DataTypes.StringType));
    kids.add(Literal.create(declared != null && declared.asBoolean(), DataTypes.BooleanType));
    List<Object> roles = new ArrayList<>();
    for (JsonNode r : rows.get("roles")) {
      roles.add(UTF8String.fromString(r.asText()));
    }
    kids.add(Literal.create(new GenericArrayData(roles.toArray()),
        DataTypes.createArrayType(DataTypes.StringType, false)));
    kids.add(in.get(k - 1));  // the ε column, then the report columns
    for (int i = 0; i < k - 1; i++) {
      kids.add(in.get(i));
    }
    Object[] texts = new Object[k];
    for (int i = 0; i < k; i++) {
      texts[i] = UTF8String.fromString(SqlFinalize.name(in.get(i)));
    }
    List<Expression> fin = new ArrayList<>();
    fin.add(new HdpLdpCells(HdpCells.seq(kids), 0, 0).toAggregateExpression());
    fin.add(options);
    fin.add(Literal.create(UTF8String.fromString(used.toString()), DataTypes.StringType));
    fin.add(Literal.create(new GenericArrayData(texts),
        DataTypes.createArrayType(DataTypes.StringType, false)));
    return SqlFinalize.named(function, in,
        SqlFinalize.call(function, "hdp_ldp_" + kind + "_finalize", fin));
  }
}
