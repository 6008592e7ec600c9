package org.hdpspark;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL form of the partial-DP family: {@code hdp_heavy_hitters}, {@code hdp_marginals},
 * {@code hdp_mwem} and {@code hdp_attribute_histograms}, each
 * {@code f(struct(col, ...), '<JSON options>'[, 'public'])}: the attributes are the struct's
 * fields (their names are the columns), the options the release API's keywords as a JSON
 * object ({@code '{"domains": {"sex": ["f", "m"]}, "eps0": 1.0}'}, plus {@code max_records}).
 *
 * <p>Only the recoding is read here, to build the native {@link HdpRecords} aggregate (the
 * same rules as the Python Column: strings as they are, booleans as {@code true}/{@code
 * false}, numbers as {@code i:<int>} when the domain is all integers or has at most 64 values,
 * else {@code d:<double>}; an extra null category unless {@code other} names a value), and
 * the public bound {@code max_records} is checked at analysis. The finalize,
 * {@code hdp_partial_<family>_finalize} registered by {@code register_sql}, builds the spec
 * from the same JSON with the release API's constructor (every other check, with its words),
 * refuses the call unless the recoding the JVM used (its last argument) is the spec's, and
 * runs the mechanism per group. No privacy-critical code here: the JVM only counts.
 */
final class HdpSqlPartial extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  static final String[][] FUNCTIONS = {
      {"hdp_heavy_hitters", "heavy_hitters"}, {"hdp_marginals", "marginals"},
      {"hdp_mwem", "mwem"}, {"hdp_attribute_histograms", "attribute_histograms"}};
  static final int LOOKUP_JOIN_MIN = 64;
  static final long DEFAULT_MAX_RECORDS = 1L << 20;
  static final long MAX_RECORDS_LIMIT = 1L << 24;

  private final String function;
  private final String family;

  HdpSqlPartial(String function, String family) {
    this.function = function;
    this.family = family;
  }

  /** The group decision of a call under a privacy unit: the Column's (PersonRows), global
   * only (a person would count once per group). */
  private String persons(JsonNode unit, JsonNode rows, String groups) {
    if (!unit.isTextual() || unit.asText().isEmpty()) {
      throw bad("`privacy_unit` (in the options of " + function + ") must name the id "
          + "column, got " + unit + ".");
    }
    if (HdpQuery.PUBLIC.equals(groups)) {
      throw bad("`privacy_unit` (in the options of " + function + ") bounds a person's rows "
          + "over the whole table: the call is for a global query, without 'public'.");
    }
    long maxRows = 1;
    if (rows != null && !rows.isNull()) {
      if (!rows.isIntegralNumber() || rows.asLong() < 1 || rows.asLong() > Integer.MAX_VALUE) {
        throw bad("`max_rows` (in the options of " + function + ") must be a positive int, "
            + "got " + rows + ".");
      }
      maxRows = rows.asLong();
    }
    try {  // the Column's decision text (json.dumps(..., sort_keys=True))
      return PersonRows.PREFIX + "{\"max_rows\": " + maxRows + ", \"unit\": "
          + new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(unit.asText())
          + "}";
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  private IllegalArgumentException bad(String text) {
    return new IllegalArgumentException("ParameterError: " + text);
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    String shape = function + "(struct(col, ...), '<JSON options>'[, 'public'])";
    int n = in.size();
    String groups = HdpQuery.NONE;
    if (n == 3) {
      String last = HdpQueryRule.constantText(in.get(2), "groups");
      if (!HdpQuery.PUBLIC.equals(last)) {
        throw bad("the last argument of " + shape + " must be 'public' or omitted, got '"
            + last + "'.");
      }
      groups = HdpQuery.PUBLIC;
    } else if (n != 2) {
      throw new IllegalArgumentException(function + " takes " + shape + ", got " + n
          + " arguments");
    }
    Expression record = in.get(0);
    if (!(record.dataType() instanceof StructType)) {
      throw bad("argument 1 of " + function + " must be struct(col, ...) of the attribute "
          + "columns, got " + record.sql() + ".");
    }
    StructType fields = (StructType) record.dataType();
    Expression options = in.get(1);
    if (!options.foldable() || !(options.dataType() instanceof StringType)
        || options.eval(null) == null) {
      throw bad("`options` (argument 2 of " + function + ") must be a constant JSON object "
          + "string, got " + options.sql() + ".");
    }
    String text = options.eval(null).toString();
    JsonNode json = SqlOptions.jsonObject(text);
    if (json == null) {
      throw bad("`options` of " + function + " must be a JSON object such as "
          + "'{\"domains\": {...}, \"eps0\": 1.0}', got " + text + ".");
    }
    JsonNode domains = json.get("domains");
    if (domains == null || !domains.isObject()) {
      throw bad("`domains` (in the options of " + function + ") must map each field of the "
          + "struct to its public values.");
    }
    JsonNode other = json.get("other");
    if (other != null && !other.isNull() && !other.isObject()) {
      throw bad("`other` (in the options of " + function + ") must map fields to a value of "
          + "their domain.");
    }
    long maxRecords = DEFAULT_MAX_RECORDS;
    JsonNode bound = json.get("max_records");
    if (bound != null) {
      if (!bound.isIntegralNumber() || bound.asLong() < 1 || bound.asLong() > MAX_RECORDS_LIMIT) {
        throw bad("`max_records` (in the options of " + function + ") must be an int in [1, "
            + MAX_RECORDS_LIMIT + "], got " + bound + ".");
      }
      maxRecords = bound.asLong();
    }
    JsonNode unit = json.get("privacy_unit");
    if (unit != null && !unit.isNull()) {
      groups = persons(unit, json.get("max_rows"), groups);
    }
    List<Expression> kids = new ArrayList<>();
    kids.add(new HdpGroup());  // HdpRecords.GROUP, then HdpRecords.QUERY
    kids.add(new HdpQuery(groups));
    ArrayNode used = JsonNodeFactory.instance.arrayNode();
    List<Object> names = new ArrayList<>();
    long space = 1;
    for (int j = 0; j < fields.fields().length; j++) {
      String name = fields.fields()[j].name();
      JsonNode dom = domains.get(name);
      if (dom == null || !dom.isArray() || dom.isEmpty()) {
        throw bad("`domains` (in the options of " + function + ") must give a non-empty list "
            + "of values for the struct field `" + name + "`.");
      }
      String kind = kind(dom, name);
      boolean ints = true;
      for (JsonNode v : dom) {
        ints &= !"number".equals(kind) || v.isIntegralNumber();
      }
      boolean exact = ints || dom.size() <= LOOKUP_JOIN_MIN;
      List<Object> values = new ArrayList<>();
      ArrayNode texts = JsonNodeFactory.instance.arrayNode();
      for (JsonNode v : dom) {
        String s;
        if ("str".equals(kind)) {
          s = v.asText();
        } else if ("bool".equals(kind)) {
          s = v.asBoolean() ? "true" : "false";
        } else if (exact && v.isIntegralNumber() && v.canConvertToLong()) {
          s = "i:" + v.asLong();
        } else {
          s = "d:" + v.asDouble();
        }
        values.add(UTF8String.fromString(s));
        texts.add(s);
      }
      int size = dom.size() + 1;
      int otherCode = dom.size();
      JsonNode o = other == null || other.isNull() ? null : other.get(name);
      if (o != null) {
        otherCode = -1;
        for (int i = 0; i < dom.size() && otherCode < 0; i++) {
          if (same(dom.get(i), o, kind)) {
            otherCode = i;
          }
        }
        if (otherCode < 0) {
          throw bad("`other[" + name + "]` (in the options of " + function + ") must be a "
              + "value of the domain of `" + name + "`, got " + o + ".");
        }
        size = dom.size();
      }
      space = space > maxRecords ? space : space * size;
      kids.add(new GetStructField(record, j, Option.apply(name)));
      kids.add(Literal.create(UTF8String.fromString(kind), DataTypes.StringType));
      kids.add(Literal.create(new GenericArrayData(values.toArray()),
          DataTypes.createArrayType(DataTypes.StringType, false)));
      kids.add(Literal.create(size, DataTypes.IntegerType));
      kids.add(Literal.create(otherCode, DataTypes.IntegerType));
      ArrayNode entry = used.addArray();
      entry.add(name).add(kind).add(texts).add(size).add(otherCode);
      names.add(UTF8String.fromString(name));
    }
    if (space > maxRecords) {
      throw bad("the " + function + " SQL function keeps per group the count of each distinct "
          + "record, so its public bound is the product of the domain sizes (each counting its "
          + "extra null category unless `other` names a value): it exceeds `max_records` = "
          + maxRecords + ". Raise `max_records` in the options (up to " + MAX_RECORDS_LIMIT
          + "), merge values, or use the release API.");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = domains.fields(); it.hasNext();) {
      String name = it.next().getKey();
      if (!names.contains(UTF8String.fromString(name))) {
        throw bad("`domains` (in the options of " + function + ") names `" + name + "`, which "
            + "is not a field of the struct.");
      }
    }
    List<Expression> fin = new ArrayList<>();
    fin.add(new HdpRecords(HdpCells.seq(kids), 0, 0).toAggregateExpression());
    fin.add(options);
    fin.add(Literal.create(UTF8String.fromString(used.toString()), DataTypes.StringType));
    return SqlFinalize.named(function, in,
        SqlFinalize.call(function, "hdp_partial_" + family + "_finalize", fin));
  }

  private String kind(JsonNode dom, String name) {
    String kind = null;
    for (JsonNode v : dom) {
      String k = v.isTextual() ? "str" : v.isBoolean() ? "bool" : v.isNumber() ? "number"
          : "other";
      if ("other".equals(k) || (kind != null && !kind.equals(k))) {
        throw bad("the domain of `" + name + "` (in the options of " + function + ") must "
            + "hold values of one kind: all strings, all numbers or all booleans.");
      }
      kind = k;
    }
    return kind;
  }

  private static boolean same(JsonNode v, JsonNode o, String kind) {
    switch (kind) {
      case "str":
        return o.isTextual() && v.asText().equals(o.asText());
      case "bool":
        return o.isBoolean() && v.asBoolean() == o.asBoolean();
      default:
        return o.isNumber() && !o.isBoolean() && v.asDouble() == o.asDouble();
    }
  }
}
