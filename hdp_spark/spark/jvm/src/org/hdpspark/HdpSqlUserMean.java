package org.hdpspark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL function {@code hdp_user_mean(value, eps, user, lower, upper[, '<JSON options>'][,
 * 'public'])}: the user-level mean's native {@link HdpUsers} aggregate wrapped in the Python
 * finalize {@code hdp_user_mean_finalize} that {@code hdp_spark.spark.register_sql(spark)}
 * registers (it holds the release key). The options are the release API's other keywords as
 * a JSON object ({@code '{"cap": "paper", "beta": 0.1, "fill": 5}'}); only {@code fill} is
 * read here (the encoding imputes it), the finalize builds the spec from the same JSON with
 * the release API's constructor (every other check, in its words) and refuses the call
 * unless the bounds and fill the JVM used are the spec's.
 *
 * <p>The per-row expressions are not written here: they are the release API's SQL template
 * ({@code hdp_spark.spark._user_mean.row_sql}), which {@code register_sql} puts in the
 * session conf {@link #ROWS_CONF}; this class substitutes the call's columns and constants
 * for the template's identifiers and resolves its built-in functions.
 */
final class HdpSqlUserMean extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  static final String FUNCTION = "hdp_user_mean";
  static final String FINALIZE = "hdp_user_mean_finalize";
  /** The session conf where register_sql puts the per-row template (a JSON list of 3). */
  static final String ROWS_CONF = "hdp_spark.sql.userMeanRows";
  static final String SHAPE = FUNCTION
      + "(value, eps, user, lower, upper[, '<JSON options>'][, 'public'])";

  private static IllegalArgumentException bad(String text) {
    return new IllegalArgumentException("ParameterError: " + text);
  }

  private static boolean isText(Expression e) {
    return e.foldable() && e.dataType() instanceof StringType;
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    int n = in.size();
    if (n < 5 || n > 7) {
      throw new IllegalArgumentException(FUNCTION + " takes " + SHAPE + ", got " + n
          + " arguments");
    }
    String groups = HdpQuery.NONE;
    int end = n;
    if (n > 5 && isText(in.get(n - 1)) && in.get(n - 1).eval(null) != null
        && HdpQuery.PUBLIC.equals(in.get(n - 1).eval(null).toString())) {
      groups = HdpQuery.PUBLIC;
      end--;
    }
    if (end == 7) {
      throw bad("the last argument of " + SHAPE + " must be 'public' or omitted, got "
          + in.get(6).sql() + ".");
    }
    Expression options = Literal.create(UTF8String.fromString("{}"), DataTypes.StringType);
    if (end == 6) {
      options = in.get(5);
      if (!isText(options) || options.eval(null) == null) {
        throw bad("`options` (argument 6 of " + FUNCTION + ") must be a constant JSON object "
            + "string, got " + options.sql() + ".");
      }
    }
    String text = options.eval(null).toString();
    JsonNode json = SqlOptions.jsonObject(text);
    if (json == null) {
      throw bad("`options` of " + FUNCTION + " must be a JSON object such as "
          + "'{\"cap\": \"paper\", \"fill\": 5}' or 'public', got " + text + ".");
    }
    JsonNode grid = json.get("eps_grid");
    if (grid != null && !grid.isNull()) {
      throw bad("`eps_grid` (in the options of " + FUNCTION + ") is not taken in SQL; use the "
          + "Column (hs.hdp_user_mean) or the release API.");
    }
    Expression value = in.get(0);
    Expression eps = in.get(1);
    Expression user = in.get(2);
    Expression lower = in.get(3);
    Expression upper = in.get(4);
    for (Expression bound : new Expression[] {lower, upper}) {
      if (!bound.foldable() || !(bound.dataType() instanceof NumericType)
          || bound.eval(null) == null) {
        throw bad("`lower` and `upper` (arguments 4 and 5 of " + FUNCTION + ") must be "
            + "constant numbers, got (" + lower.sql() + ", " + upper.sql() + ").");
      }
    }
    double lo = HdpCells.real(lower.eval(null));
    double hi = HdpCells.real(upper.eval(null));
    HdpSqlMean.checkBounds(lo, hi, lower.sql(), upper.sql());
    double fill = (lo + hi) / 2;
    JsonNode f = json.get("fill");
    if (f != null && !f.isNull()) {
      if (!f.isNumber()) {
        throw bad("`fill` (in the options of " + FUNCTION + ") must be a number, got " + f
            + ".");
      }
      fill = f.asDouble();
    }
    Map<String, Expression> names = new HashMap<>();
    names.put("__hdp_value", value);
    names.put("__hdp_eps", eps);
    names.put("__hdp_lower", Literal.create(lo, DataTypes.DoubleType));
    names.put("__hdp_upper", Literal.create(hi, DataTypes.DoubleType));
    names.put("__hdp_span", Literal.create(hi - lo, DataTypes.DoubleType));
    names.put("__hdp_fill", Literal.create(fill, DataTypes.DoubleType));
    List<Expression> rows = new ArrayList<>();
    for (JsonNode t : SqlTemplate.conf(ROWS_CONF, FUNCTION)) {
      rows.add(SqlTemplate.expr(t.asText(), names));
    }
    List<Expression> kids = new ArrayList<>();
    kids.add(new HdpGroup());  // HdpUsers.GROUP, then HdpUsers.QUERY
    kids.add(new HdpQuery(groups));
    kids.add(user);
    kids.addAll(rows);  // Q, E, BAD
    kids.add(value);
    kids.add(eps);
    kids.add(Literal.create(new GenericArrayData(new Object[] {HdpSqlMean.RULES[2],
        HdpSqlMean.RULES[3], Double.NaN}),
        DataTypes.createArrayType(DataTypes.DoubleType, false)));
    String[] columns = {SqlFinalize.name(value), SqlFinalize.name(user), SqlFinalize.name(eps)};
    Object[] texts = new Object[columns.length];
    for (int i = 0; i < columns.length; i++) {
      texts[i] = UTF8String.fromString(columns[i]);
    }
    kids.add(Literal.create(new GenericArrayData(texts),
        DataTypes.createArrayType(DataTypes.StringType, false)));
    List<Expression> fin = new ArrayList<>();
    fin.add(new HdpUsers(HdpCells.seq(kids), 0, 0, false).toAggregateExpression());
    fin.add(options);
    fin.add(Literal.create(fill, DataTypes.DoubleType));
    for (String c : columns) {
      fin.add(Literal.create(UTF8String.fromString(c), DataTypes.StringType));
    }
    fin.add(lower);  // as written: an integer bound stays an integer, as in the Python spec
    fin.add(upper);
    return SqlFinalize.named(FUNCTION, in, SqlFinalize.call(FUNCTION, FINALIZE, fin));
  }
}
