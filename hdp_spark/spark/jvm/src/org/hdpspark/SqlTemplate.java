package org.hdpspark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry$;
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.LambdaFunction;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.NamedLambdaVariable;
import org.apache.spark.sql.catalyst.expressions.UnresolvedNamedLambdaVariable;
import org.apache.spark.sql.types.DataTypes;
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

  /**
   * The expression of the template {@code text} with {@code names} substituted. The
   * variables of its lambda functions ({@code transform(a, x -> ...)}, over arrays the
   * template casts to {@code ARRAY<DOUBLE>}) are bound here, as nullable doubles, so that
   * the built-in functions of the lambda's body resolve like the rest.
   */
  static Expression expr(String text, Map<String, Expression> names) {
    Expression parsed = CatalystSqlParser$.MODULE$.parseExpression(text);
    Map<String, Expression> variables = new HashMap<>();
    lambdaVariables(parsed, variables);
    return substitute(parsed, names, variables);
  }

  private static void lambdaVariables(Expression e, Map<String, Expression> out) {
    if (e instanceof LambdaFunction) {
      for (Object a : CollectionConverters.asJava(((LambdaFunction) e).arguments())) {
        String name = ((UnresolvedNamedLambdaVariable) a).name();
        out.put(name, new NamedLambdaVariable(name, DataTypes.DoubleType, true,
            NamedExpression$.MODULE$.newExprId(), new AtomicReference<Object>()));
      }
    }
    for (Expression k : CollectionConverters.asJava(e.children())) {
      lambdaVariables(k, out);
    }
  }

  /** The parser reads every identifier inside a lambda's body as a lambda variable. */
  private static String identifier(Expression e) {
    if (e instanceof UnresolvedNamedLambdaVariable) {
      return ((UnresolvedNamedLambdaVariable) e).name();
    }
    return e instanceof UnresolvedAttribute ? ((UnresolvedAttribute) e).name() : null;
  }

  private static Expression substitute(Expression e, Map<String, Expression> names,
      Map<String, Expression> variables) {
    String name = identifier(e);
    if (name != null) {
      Expression a = variables.containsKey(name) ? variables.get(name) : names.get(name);
      if (a == null) {
        throw new IllegalStateException("hdp_spark: a SQL template names an unknown input "
            + name);
      }
      return a;
    }
    List<Expression> kids = new ArrayList<>();
    boolean changed = false;
    for (Expression k : CollectionConverters.asJava(e.children())) {
      Expression r = substitute(k, names, variables);
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
