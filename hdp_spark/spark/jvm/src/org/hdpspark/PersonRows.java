package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNaN;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.RowFrame$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.WindowExpression;
import org.apache.spark.sql.catalyst.expressions.WindowSpecDefinition;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The partial-DP family's privacy unit in a Column aggregate (group decision {@code
 * persons:{"max_rows": R, "unit": column}}): the release API's rule
 * ({@code hdp_spark.spark._heavy_hitters.bounded_persons}) inserted below the aggregate, in
 * the same native expressions:
 *
 * <pre>
 *   Project   [the input's columns]
 *   Filter    [the person's rows <= R]
 *   Window    [count(1) over the person]
 *   Filter    [person not null (not NaN)]
 * </pre>
 *
 * <p>One shuffle by person, no job of its own. Privacy (the rule's argument, beside the
 * pandas rule): whether a person's rows are kept depends only on how many rows the person
 * has, never on a value or on another person; a kept person counts with all of at most R
 * rows, and the mechanisms run at ε₀/R per row. Global aggregates only: under a grouping a
 * person would count once per group (the release API's partial-DP family is global too).
 */
final class PersonRows {

  private PersonRows() {}

  static final String PREFIX = "persons:";

  static final String GROUPED = "hdp_spark: `privacy_unit` of a partial-DP Column bounds a "
      + "person's rows over the whole table: use the Column in a global aggregate, "
      + "df.agg(...), as the release API (hs.agg) does; under groupBy a person would count "
      + "once in every group.";

  static final String DIFFER = "hdp_spark: the hdp_spark aggregators of an aggregate with a "
      + "partial-DP Column under `privacy_unit` must all take the same `privacy_unit` and "
      + "`max_rows` (one bounding of the rows per aggregate); put the others in another "
      + "aggregate.";

  static boolean holds(String groups) {
    return groups.startsWith(PREFIX);
  }

  /** {@code child}'s rows of the persons with at most {@code max_rows} rows. */
  static LogicalPlan bounded(LogicalPlan child, String groups) {
    JsonNode p;
    try {
      p = new ObjectMapper().readTree(groups.substring(PREFIX.length()));
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("hdp_spark: a malformed group decision", e);
    }
    String column = p.get("unit").asText();
    int maxRows = p.get("max_rows").asInt();
    List<Attribute> input = CollectionConverters.asJava(child.output());
    Attribute person = UnitPlan.find(input, column);  // its MISSING error: the same words
    Expression present = new IsNotNull(person);
    if (person.dataType() instanceof DoubleType || person.dataType() instanceof FloatType) {
      present = new And(present, new Not(new IsNaN(person)));
    }
    List<Expression> by = Arrays.asList((Expression) person);
    SpecifiedWindowFrame frame = new SpecifiedWindowFrame(RowFrame$.MODULE$,
        UnboundedPreceding$.MODULE$, UnboundedFollowing$.MODULE$);
    Expression count = new Count(seq(Arrays.asList(
        (Expression) Literal.create(1, DataTypes.IntegerType)))).toAggregateExpression();
    Alias rows = SelectionPlan.alias(new WindowExpression(count,
        new WindowSpecDefinition(seq(by), seq(new ArrayList<SortOrder>()), frame)),
        "__hdp_person_rows");
    LogicalPlan counted = new Window(seq(Arrays.asList((NamedExpression) rows)), seq(by),
        seq(new ArrayList<SortOrder>()), new Filter(present, child), Option.empty());
    LogicalPlan kept = new Filter(new LessThanOrEqual(rows.toAttribute(),
        Literal.create((long) maxRows, DataTypes.LongType)), counted);
    return new Project(seq(new ArrayList<NamedExpression>(input)), kept);
  }

  private static <T> Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }
}
