package org.hdpspark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The SQL form of every aggregator registered from Python with a generic SQL form
 * ({@code hdp_spark.register_aggregator}, {@code SqlForm}):
 * {@code hdp_aggregate('<name>', value, eps, lower, upper, options[, 'public'])} for an
 * aggregator over level cells (counts and encoded sums per epsilon level, as hdp_mean), and
 * {@code hdp_aggregate('<name>', category, eps, array(...), options[, 'public'])} for one over
 * category cells (as hdp_histogram). {@code options} is a constant JSON object of the
 * aggregator's other keywords ({@code '{"eps0": 1.0}'}), read by its Python finalize.
 *
 * <p>The native {@link HdpCells} aggregate is built here exactly as for hdp_mean and
 * hdp_histogram (the same level rules, encoding and query placeholder), so the query
 * fingerprint, the group decision and {@link QueryGuard} apply unchanged; the finalize is
 * {@code hdp_aggregate_<name>_finalize}, which {@code hdp_spark.spark.register_sql(spark)}
 * registers for each such aggregator, and whose names and cell shapes it lists in the
 * session conf {@link #CONF} ({@code name:level,name:category}).
 */
final class HdpSqlAggregate extends AbstractFunction1<Seq<Expression>, Expression>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  static final String FUNCTION = "hdp_aggregate";
  static final String CONF = "hdp_spark.sql.aggregates";
  static final String LEVEL = "level";
  static final String CATEGORY = "category";

  /** The registered aggregators with a generic SQL form: name to cell shape. */
  static Map<String, String> registered() {
    String text = org.apache.spark.sql.internal.SQLConf.get().getConfString(CONF, "");
    Map<String, String> out = new LinkedHashMap<>();
    for (String entry : text.split(",")) {
      int at = entry.indexOf(':');
      if (at > 0) {
        out.put(entry.substring(0, at), entry.substring(at + 1));
      }
    }
    return out;
  }

  @Override
  public Expression apply(Seq<Expression> args) {
    List<Expression> in = CollectionConverters.asJava(args);
    if (in.isEmpty()) {
      throw new IllegalArgumentException("hdp_aggregate takes ('<name>', ...), got no "
          + "arguments");
    }
    String name = HdpQueryRule.constantText(in.get(0), "name");
    Map<String, String> known = registered();
    String cells = known.get(name);
    if (cells == null) {
      throw new IllegalArgumentException("ParameterError: `name` (argument 1 of "
          + "hdp_aggregate) must be an aggregator with a SQL form registered on this session ("
          + (known.isEmpty() ? "none: call hdp_spark.spark.register_sql(spark) after "
              + "register_aggregator" : String.join(", ", known.keySet()))
          + "); got '" + name + "'.");
    }
    boolean level = LEVEL.equals(cells);
    int required = level ? 6 : 5;
    String shape = level ? "('" + name + "', value, eps, lower, upper, options[, 'public'])"
        : "('" + name + "', category, eps, array(...), options[, 'public'])";
    int n = in.size();
    HdpQuery query = new HdpQuery(HdpQuery.NONE);
    if (n == required + 1) {
      String last = HdpQueryRule.constantText(in.get(n - 1), "groups");
      if (!HdpQuery.PUBLIC.equals(last)) {
        throw new IllegalArgumentException("ParameterError: the last argument of "
            + "hdp_aggregate" + shape + " must be 'public' or omitted, got '" + last + "'.");
      }
      query = new HdpQuery(HdpQuery.PUBLIC);
    } else if (n != required) {
      throw new IllegalArgumentException("hdp_aggregate takes " + shape + ", got " + n
          + " arguments");
    }
    Expression options = in.get(required - 1);
    if (!options.foldable() || !(options.dataType() instanceof StringType)
        || options.eval(null) == null) {
      throw new IllegalArgumentException("ParameterError: `options` (argument " + required
          + " of hdp_aggregate) must be a constant JSON object string such as '{}', got "
          + options.sql() + ".");
    }
    Expression column = in.get(1);
    Expression eps = in.get(2);
    List<Expression> cellArgs = new ArrayList<>();
    List<Expression> fin = new ArrayList<>();
    cellArgs.add(eps);
    if (level) {
      Expression lower = in.get(3);
      Expression upper = in.get(4);
      if (!lower.foldable() || !upper.foldable()) {
        throw new IllegalArgumentException("hdp_aggregate: `lower` and `upper` must be "
            + "constants");
      }
      double lo = HdpCells.real(lower.eval(null));
      double hi = HdpCells.real(upper.eval(null));
      HdpSqlMean.checkBounds(lo, hi, lower.sql(), upper.sql());
      cellArgs.add(Literal.create(0, DataTypes.IntegerType));
      cellArgs.add(HdpSqlMean.rules());
      cellArgs.add(Literal.create(null, DataTypes.createArrayType(DataTypes.DoubleType,
          false)));
      cellArgs.add(new HdpGroup());
      cellArgs.add(Literal.create(null, DataTypes.createArrayType(DataTypes.StringType,
          false)));
      cellArgs.add(query);
      cellArgs.add(column);
      cellArgs.add(Literal.create(lo, DataTypes.DoubleType));
      cellArgs.add(Literal.create(hi, DataTypes.DoubleType));
      cellArgs.add(Literal.create((lo + hi) / 2, DataTypes.DoubleType));  // the default fill
      fin.add(new HdpCells(HdpCells.seq(cellArgs), 0, 0).toAggregateExpression());
      fin.add(text(SqlFinalize.name(column)));
      fin.add(text(SqlFinalize.name(eps)));
      fin.add(Literal.create(lo, DataTypes.DoubleType));
      fin.add(Literal.create(hi, DataTypes.DoubleType));
    } else {
      Literal domain = HdpSqlHistogram.domain(in.get(3));
      cellArgs.add(column);
      cellArgs.add(HdpSqlMean.rules());
      cellArgs.add(Literal.create(null, DataTypes.createArrayType(DataTypes.DoubleType,
          false)));
      cellArgs.add(new HdpGroup());
      cellArgs.add(domain);
      cellArgs.add(query);
      fin.add(new HdpCells(HdpCells.seq(cellArgs), 0, 0).toAggregateExpression());
      fin.add(text(SqlFinalize.name(column)));
      fin.add(text(SqlFinalize.name(eps)));
      fin.add(domain);
    }
    fin.add(options);
    return SqlFinalize.named(FUNCTION, in,
        SqlFinalize.call(FUNCTION, "hdp_aggregate_" + name + "_finalize", fin));
  }

  private static Literal text(String s) {
    return Literal.create(UTF8String.fromString(s), DataTypes.StringType);
  }
}
