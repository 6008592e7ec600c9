package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.Concat;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNaN;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Length;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.Add;
import org.apache.spark.sql.catalyst.expressions.Pmod;
import org.apache.spark.sql.catalyst.expressions.RowNumber;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.Min;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.types.DataTypes;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * A local-DP Column aggregator under a privacy unit (group decision {@code ldpunit:{"unit":
 * column, "name": aggregator name}}, the Column's secret bounding key in its {@link HdpQuery}
 * placeholder): the release API's rule ({@code hdp_spark.core.privacy_unit.ldp}; on Spark
 * {@code hdp_spark.spark.privacy_unit.keep_one_report}) inserted below the aggregate: the
 * streaming operator {@link LdpUnitBound} ({@code HdpLdpUnitBound}) over the rows with an
 * id, their safe ε, index and q (the columns the aggregate does not read: null), the query's
 * key in its non-printed parameters; or, where the session sets {@code
 * hdp_spark.unitOperator} to false, the same native expressions and one window
 * specification as the release API's fallback:
 *
 * <pre>
 *   Project [the input's columns, safe ε]       (the aggregate reads safe ε for ε)
 *   Filter  [row position == pmod(rank, m) + 1]
 *   Window  [m = count of rows at ε_person over the person]
 *   Window  [ε_person = min(safe ε) over the person, row position = row_number over
 *            (person; safe ε, index, q)]
 *   Project [safe ε, index, q, rank = hdp_ldp_position(length-tagged person text)]
 *   Filter  [person not null]
 * </pre>
 *
 * <p>The rank is {@link HdpSecretRank} under the query's key: SHA-256 of (the Column's
 * bounding key, "query", the query's fingerprint), {@link UnitPlan#queryKey}, which is the
 * release API's bounding key of the query's release key. Privacy: the rule's argument (the
 * kept report's law is the average of the person's candidates' laws, because the position is
 * uniform and unknown to whoever reads the output): the key never enters a printed plan (it
 * lives in non-product fields) nor the fingerprint; re-analysing the same query gives the
 * same fingerprint, hence the same kept reports; another Column or query another key.
 */
final class LdpUnitPlan {

  private LdpUnitPlan() {}

  static final String PREFIX = "ldpunit:";

  static final String GROUPED = "ParameterError: `privacy_unit`: local-DP aggregators under a "
      + "privacy unit release the whole table only (a report cannot be split over groups, "
      + "and a person's group membership is private): use df.agg(...), not "
      + "df.groupBy(...).agg(...).";

  static final String ALONE = "ParameterError: `privacy_unit`: a local-DP aggregator under a "
      + "privacy unit keeps one report per person for itself, so it must be the only "
      + "hdp_spark aggregator of its aggregate (run one df.agg(...) per aggregator).";

  static final String NO_KEY = "InternalError: a local-DP Column under `privacy_unit` "
      + "reached the analyzer without its key (build it with hdp_spark.spark.ldp_mean(..., "
      + "privacy_unit=...)).";

  /** Whether a group decision is a local-DP privacy unit. */
  static boolean holds(String groups) {
    return groups.startsWith(PREFIX);
  }

  /** The aggregate {@code a} (its expressions {@code outs}, whose one local-DP cells
   * aggregate carries the decision {@code groups}) over the one report per person it keeps
   * under {@code secret} and the query's fingerprint {@code fp}. */
  static LogicalPlan build(Aggregate a, List<NamedExpression> outs, String groups,
      String secret, String fp) {
    if (secret == null) {
      throw new IllegalStateException(NO_KEY);
    }
    JsonNode p;
    try {
      p = new ObjectMapper().readTree(groups.substring(PREFIX.length()));
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("hdp_spark: a malformed group decision", e);
    }
    String column = p.get("unit").asText();
    String name = p.get("name").asText();
    List<HdpLdpCells> cells = new ArrayList<>();
    for (NamedExpression e : outs) {
      collect((Expression) e, cells);
    }
    HdpLdpCells c = cells.get(0);
    List<Expression> kids = CollectionConverters.asJava(c.children());
    LogicalPlan base = a.child();
    List<Attribute> input = CollectionConverters.asJava(base.output());
    Attribute person = UnitPlan.find(input, column);
    Expression text = UnitKeys.textOf(person);
    if (text == null) {
      throw new IllegalArgumentException(String.format(UnitPlan.TYPE, column,
          person.dataType().simpleString()));
    }
    for (int i = HdpLdpCells.LEVEL; i < kids.size(); i++) {
      if (i != HdpLdpCells.MECHANISM && i != HdpLdpCells.DECLARED && i != HdpLdpCells.ROLES
          && kids.get(i).references().contains(person)) {
        throw new IllegalArgumentException(String.format(UnitPlan.READ, column));
      }
    }
    Expression eps = kids.get(HdpLdpCells.COLUMNS);
    if (!(eps instanceof Attribute)) {
      throw new IllegalArgumentException("ParameterError: `eps` of a local-DP aggregator "
          + "under `privacy_unit` must name a column of the aggregated table.");
    }
    Attribute epsAttr = (Attribute) eps;
    // the release API's safe ε: null, NaN and ε <= 0 read as 0 (the person spends nothing)
    Expression e = UnitPlan.cast(epsAttr, DataTypes.DoubleType);
    Expression bad = new Or(new Or(new IsNull(e), new IsNaN(e)),
        new LessThanOrEqual(e, Literal.create(0.0, DataTypes.DoubleType)));
    Expression safe = new If(bad, Literal.create(0.0, DataTypes.DoubleType), e);
    Alias epsA = SelectionPlan.alias(safe, "__pu_eps");
    Alias indexA = SelectionPlan.alias(reading(kids.get(HdpLdpCells.INDEX), epsAttr, safe),
        "__pu_index");
    Alias qA = SelectionPlan.alias(reading(kids.get(HdpLdpCells.Q), epsAttr, safe), "__pu_q");
    List<NamedExpression> reads = reads(outs, epsAttr, epsA.toAttribute());
    String key = UnitPlan.queryKey(secret, fp);
    if (UnitBoundPlan.enabled()) {  // the streaming operator (the session setting: default)
      AttributeSet read = AttributeSet.apply(UnitPlan.seq(new ArrayList<Expression>()));
      for (NamedExpression r : reads) {
        read = read.$plus$plus(((Expression) r).references());
      }
      return a.copy(a.groupingExpressions(), UnitPlan.seq(reads), LdpUnitBound.build(base,
          person, read, epsA, indexA, qA, key, name), a.hint());
    }
    Expression tagged = new Concat(UnitPlan.seq(Arrays.asList(
        UnitPlan.cast(new Length(text), DataTypes.StringType), UnitPlan.lit(":"), text)));
    Alias rankA = SelectionPlan.alias(HdpSecretRank.of(tagged, key, name), "__pu_rank");
    List<NamedExpression> cols = new ArrayList<>(input);
    cols.addAll(Arrays.asList(epsA, indexA, qA, rankA));
    LogicalPlan framed = new Project(UnitPlan.seq(cols),
        new Filter(new IsNotNull(person), base));
    List<Expression> by = Arrays.asList(person);
    List<Expression> order = Arrays.asList(epsA.toAttribute(), indexA.toAttribute(),
        qA.toAttribute());
    Alias pos = UnitPlan.window(new RowNumber(), by, order, true, "__pu_pos");
    Alias pe = UnitPlan.window(new Min(epsA.toAttribute()).toAggregateExpression(), by, order,
        false, "__pu_person_eps");
    LogicalPlan w = new Window(UnitPlan.seq(Arrays.asList((NamedExpression) pos, pe)),
        UnitPlan.seq(by), UnitPlan.orders(order), framed, Option.empty());
    Expression atMin = new If(new EqualTo(epsA.toAttribute(), pe.toAttribute()),
        Literal.create(1L, DataTypes.LongType), Literal.create(0L, DataTypes.LongType));
    Alias m = UnitPlan.window(new Sum(atMin, Sum.apply$default$2()).toAggregateExpression(),
        by, order, false, "__pu_m");
    w = new Window(UnitPlan.seq(Arrays.asList((NamedExpression) m)), UnitPlan.seq(by),
        UnitPlan.orders(order), w, Option.empty());
    Expression kept = new EqualTo(UnitPlan.cast(pos.toAttribute(), DataTypes.LongType),
        new Add(new Pmod(rankA.toAttribute(), m.toAttribute(), Pmod.apply$default$3()),
            Literal.create(1L, DataTypes.LongType), Add.apply$default$3()));
    List<NamedExpression> out = new ArrayList<>(input);
    out.add(epsA.toAttribute());
    LogicalPlan bounded = new Project(UnitPlan.seq(out), new Filter(kept, w));
    return a.copy(a.groupingExpressions(), UnitPlan.seq(reads), bounded, a.hint());
  }

  /** The aggregate's expressions {@code outs} reading the safe ε {@code safeEps} for the ε
   * column {@code epsAttr} (its level, index and q). */
  private static List<NamedExpression> reads(List<NamedExpression> outs, Attribute epsAttr,
      Attribute safeEps) {
    List<NamedExpression> reads = new ArrayList<>();
    for (NamedExpression o : outs) {
      reads.add((NamedExpression) ((Expression) o).transformUp(
          new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
              return x instanceof HdpLdpCells;
            }

            @Override
            public Expression apply(Expression x) {
              List<Expression> k = new ArrayList<>(CollectionConverters.asJava(x.children()));
              for (int i : new int[] {HdpLdpCells.LEVEL, HdpLdpCells.INDEX, HdpLdpCells.Q}) {
                k.set(i, reading(k.get(i), epsAttr, safeEps));
              }
              return x.withNewChildren(UnitPlan.seq(k));
            }
          }));
    }
    return reads;
  }

  /** {@code e} with the ε column {@code eps} replaced by {@code by}. */
  private static Expression reading(Expression e, Attribute eps, Expression by) {
    return e.transformUp(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression x) {
        return x instanceof Attribute && ((Attribute) x).exprId().equals(eps.exprId());
      }

      @Override
      public Expression apply(Expression x) {
        return by;
      }
    });
  }

  private static void collect(Expression e, List<HdpLdpCells> into) {
    if (e instanceof AggregateExpression
        && ((AggregateExpression) e).aggregateFunction() instanceof HdpLdpCells) {
      into.add((HdpLdpCells) ((AggregateExpression) e).aggregateFunction());
      return;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      collect(c, into);
    }
  }
}
