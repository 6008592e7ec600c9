package org.hdpspark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.types.DataTypes;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * The plan of a grouped aggregate whose hdp_spark aggregators release under partition
 * selection ({@code keys=select_keys(...)}, group decision {@code select:<parameters>}).
 *
 * <p>An aggregate has one row per group found in the data, and the keys found are not a DP
 * output: a group that is not selected must leave no row. So the aggregate becomes
 *
 * <pre>
 *   Project   [the query's outputs: each aggregator's finalize, reading W&#771; and A]
 *   Filter    [W&#771; is not null: the selected groups only]
 *   Project   [W&#771; = the selection's finalize over the first aggregator's cells]
 *   Aggregate [the native cells of every aggregator, the grouping values]
 *   Filter    [no null or NaN grouping value (never released, as in the release API)]
 * </pre>
 *
 * <p>Privacy: one selection per aggregate (one δ; each person charged once): the selection's
 * noisy weight is drawn once per group, from the first aggregator's key, and every
 * aggregator's statistics divide by that same W&#771; and take the (1 - f)/A share of the budget,
 * A the number of aggregators (as the release API's {@code agg(..., keys=select_keys(...))}).
 * Every aggregator must read the same ε column and grid (one κ_i per row drives the selection
 * and every statistic). Exact aggregates of Spark ({@code count}, {@code sum}, ...) next to a
 * selection would publish exact values of the selected groups: refused. The candidate keys
 * never reach the output, the plan or a log: the filter runs on the executors, before
 * anything leaves them. The selection's finalize is marked nondeterministic so that the
 * optimizer neither pushes the filter below it nor evaluates it twice.
 */
final class SelectionPlan {

  private SelectionPlan() {}

  static final String PREFIX = "select:";

  static final String GLOBAL = "hdp_spark: `keys=select_keys(...)` chooses which groups are "
      + "published: it needs a grouped aggregate, df.groupBy(...).agg(...); a global "
      + "aggregate has one row and no group keys.";

  static final String EXACT = "hdp_spark: an aggregate under `keys=select_keys(...)` may hold "
      + "hdp_spark aggregators only: an exact Spark aggregate (count, sum, ...) next to them "
      + "would publish exact values of the selected groups. Use hdp_spark aggregators for "
      + "every output, or compute exact figures in a separate query.";

  static final String SAME_EPS = "hdp_spark: under `keys=select_keys(...)` every hdp_spark "
      + "aggregator of one aggregate must read the same `eps` column and `eps_grid` (one "
      + "κ_i per row drives the selection and every statistic).";

  static final String NO_FINALIZE = "hdp_spark: an aggregate under `keys=select_keys(...)` "
      + "needs the Column aggregators hdp_mean/hdp_histogram (their selection finalize)";

  /** The plan above, over {@code child} (the aggregate's input, null keys removed). */
  static LogicalPlan build(Aggregate a, List<NamedExpression> outs, LogicalPlan child) {
    return build(a, outs, child, false);
  }

  /** {@code global}: a global aggregate is taken (a privacy unit over public keys, no
   * threshold: its one group is always released, {@link UnitPlan}). */
  static LogicalPlan build(Aggregate a, List<NamedExpression> outs, LogicalPlan child,
      boolean global) {
    List<Expression> groups = CollectionConverters.asJava(a.groupingExpressions());
    if (groups.isEmpty() && !global) {
      throw new IllegalArgumentException(GLOBAL);
    }
    List<HdpSelected> markers = new ArrayList<>();
    Expression[] eps = {null, null};
    for (NamedExpression e : outs) {
      visit((Expression) e, markers, eps);
    }
    if (markers.isEmpty()) {
      throw new IllegalArgumentException(NO_FINALIZE);
    }
    List<NamedExpression> aggs = new ArrayList<>();
    Map<Expression, Attribute> lowered = new HashMap<>();
    Expression weight = lower(markers.get(0).weight(), groups, aggs, lowered);
    Alias weightAlias = alias(weight, "__hdp_selection_weight");
    Attribute weightAttr = weightAlias.toAttribute();
    Literal parts = Literal.create(markers.size(), DataTypes.IntegerType);
    List<NamedExpression> top = new ArrayList<>();
    for (NamedExpression e : outs) {
      if (!contains((Expression) e, HdpSelected.class)
          && !contains((Expression) e, AggregateExpression.class)) {
        aggs.add(e);  // a grouping value (or a constant): computed by the aggregate
        top.add(e.toAttribute());
        continue;
      }
      Expression low = lower((Expression) e, groups, aggs, lowered);
      top.add((NamedExpression) low.transformUp(
          new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
              return x instanceof HdpSelected || x instanceof HdpSelection;
            }

            @Override
            public Expression apply(Expression x) {
              if (x instanceof HdpSelected) {
                return ((HdpSelected) x).value();
              }
              return HdpSelection.WEIGHT.equals(((HdpSelection) x).what) ? weightAttr : parts;
            }
          }));
    }
    Aggregate bottom = a.copy(a.groupingExpressions(), seq(aggs), child, a.hint());
    List<NamedExpression> mid = new ArrayList<>();
    for (Attribute out : CollectionConverters.asJava(bottom.output())) {
      mid.add(out);
    }
    mid.add(weightAlias);
    LogicalPlan selected = new Filter(new IsNotNull(weightAttr), new Project(seq(mid), bottom));
    return new Project(seq(top), selected);
  }

  /** Whether an aggregate's outputs hold a selection marker (the native cells alone, as
   * tests read them, are not a release: no selection applies, as for 'cells'). */
  static boolean marked(List<NamedExpression> outs) {
    for (NamedExpression e : outs) {
      if (contains((Expression) e, HdpSelected.class)) {
        return true;
      }
    }
    return false;
  }

  /** Collects the selection markers of {@code e} (pre-order) and checks its aggregates. */
  private static void visit(Expression e, List<HdpSelected> markers, Expression[] eps) {
    if (e instanceof HdpSelected) {
      markers.add((HdpSelected) e);
    }
    if (e instanceof AggregateExpression) {
      Object f = ((AggregateExpression) e).aggregateFunction();
      if (!(f instanceof HdpCells)) {
        throw new IllegalArgumentException(EXACT);
      }
      List<Expression> kids = CollectionConverters.asJava(((HdpCells) f).children());
      if (eps[0] == null) {
        eps[0] = kids.get(0);
        eps[1] = kids.get(3);
      } else if (!eps[0].semanticEquals(kids.get(0)) || !eps[1].semanticEquals(kids.get(3))) {
        throw new IllegalArgumentException(SAME_EPS);
      }
      return;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      visit(c, markers, eps);
    }
  }

  private static boolean contains(Expression e, Class<?> kind) {
    if (kind.isInstance(e)) {
      return true;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      if (contains(c, kind)) {
        return true;
      }
    }
    return false;
  }

  /**
   * {@code e} with every aggregate and every grouping expression in it replaced by an
   * attribute of the aggregate below (added to {@code aggs} once per distinct expression),
   * as Spark's own extraction of Python UDFs above an aggregate does.
   */
  private static Expression lower(Expression e, List<Expression> groups,
      List<NamedExpression> aggs, Map<Expression, Attribute> lowered) {
    return e.transformDown(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression x) {
        if (x instanceof AggregateExpression) {
          return true;
        }
        if (x.foldable() || x instanceof HdpSelection) {
          return false;
        }
        for (Expression g : groups) {
          if (g.semanticEquals(x)) {
            return true;
          }
        }
        return false;
      }

      @Override
      public Expression apply(Expression x) {
        Expression key = x.canonicalized();
        Attribute attr = lowered.get(key);
        if (attr == null) {
          NamedExpression named = x instanceof NamedExpression ? (NamedExpression) x
              : alias(x, x instanceof AggregateExpression ? "__hdp_cells" : "__hdp_group");
          aggs.add(named);
          attr = named.toAttribute();
          lowered.put(key, attr);
        }
        return attr;
      }
    });
  }

  static Alias alias(Expression e, String name) {
    Seq<String> none = CollectionConverters.asScala(new ArrayList<String>()).toList();
    return new Alias(e, name, NamedExpression.newExprId(), none, Option.empty(), none);
  }

  private static <T> Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }
}
