package org.hdpspark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry$;
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The per-row expressions of a SQL function, from the release API's SQL templates: texts
 * that {@code hdp_spark.spark.register_sql} puts in the session conf (built by the same
 * Python functions as the release path's and the Column's expressions), whose identifiers
 * {@code __hdp_<name>} stand for the call's columns and constants. Parsed here, the call's
 * expressions substituted for the identifiers and the built-in functions resolved: the JVM
 * holds no copy of the per-row rules.
 */
final class SqlTemplate {

  private SqlTemplate() {}

  /** The JSON that register_sql put in the session conf {@code conf}. */
  static JsonNode conf(String conf, String function) {
    String text = org.apache.spark.sql.internal.SQLConf.get().getConfString(conf, "");
    JsonNode json;
    try {
      json = text.isEmpty() ? null : new ObjectMapper().readTree(text);
    } catch (Exception e) {
      json = null;
    }
    if (json == null) {
      throw new IllegalStateException(function + " in SQL needs its finalize: call "
          + "hdp_spark.spark.register_sql(spark) on this session first");
    }
    return json;
  }

  /** The expression of the template {@code text} with {@code names} substituted. */
  static Expression expr(String text, Map<String, Expression> names) {
    return substitute(CatalystSqlParser$.MODULE$.parseExpression(text), names);
  }

  private static Expression substitute(Expression e, Map<String, Expression> names) {
    if (e instanceof UnresolvedAttribute) {
      Expression a = names.get(((UnresolvedAttribute) e).name());
      if (a == null) {
        throw new IllegalStateException("hdp_spark: a SQL template names an unknown input "
            + ((UnresolvedAttribute) e).name());
      }
      return a;
    }
    List<Expression> kids = new ArrayList<>();
    boolean changed = false;
    for (Expression k : CollectionConverters.asJava(e.children())) {
      Expression r = substitute(k, names);
      kids.add(r);
      changed |= r != k;
    }
    Expression out = changed ? e.withNewChildren(HdpCells.seq(kids)) : e;
    if (out instanceof UnresolvedFunction) {
      UnresolvedFunction call = (UnresolvedFunction) out;
      FunctionIdentifier id = new FunctionIdentifier(call.nameParts().last(), Option.empty(),
          Option.empty());
      try {
        return (Expression) FunctionRegistry$.MODULE$.builtin().lookupFunction(id,
            call.arguments());
      } catch (Exception ex) {  // AnalysisException is checked in Java
        throw new IllegalStateException(ex.getMessage(), ex);
      }
    }
    return out;
  }
}
