package org.hdpspark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNaN;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * An analyzer (post-hoc resolution) rule: gives every {@link HdpRelease} of an aggregate the
 * fingerprint of what it aggregates ({@link QueryFingerprint}) in place of its
 * {@link HdpQuery} placeholder, and refuses a grouped aggregate whose hdp_spark aggregator
 * made no group decision.
 *
 * <p>It runs at analysis, on the analyzed plan, so the fingerprint does not depend on caching,
 * optimization or physical planning, and a DataFrame's plan is analyzed once: re-evaluating it
 * reuses the same fingerprint. Idempotent (a replaced placeholder is a constant).
 */
public final class HdpQueryRule extends Rule<LogicalPlan> {

  /** What a grouped aggregate without a group decision raises (the message names the
   * choices; the Python API maps it to its own error). */
  static final String UNDECIDED = "hdp_spark: a grouped hdp_spark aggregator publishes "
      + "one row per group, so which groups appear is a privacy decision. Choose one: "
      + "declare the grouping values public with keys='public' (Column) or a last SQL "
      + "argument 'public' (e.g. hdp_mean(x, eps, 0, 100, 'public')), list the public keys "
      + "with keys=[...] (Column: other groups are left out), select them privately with "
      + "keys=select_keys(delta=..., c=..., share=...) (Column), or use the release API, "
      + "hdp_spark.spark.agg(df, ..., by=..., keys=...), with a key list or select_keys(...) "
      + "(DP partition selection).";

  static final String KEYS_GLOBAL = "hdp_spark: `keys=[...]` lists group keys: it needs a "
      + "grouped aggregate, df.groupBy(...).agg(...); a global aggregate has none.";

  static final String KEYS_DIFFER = "hdp_spark: the hdp_spark aggregators of one aggregate "
      + "must take the same `keys=` (one public key set, or one select_keys(...), per "
      + "groupBy, as in hdp_spark.spark.agg).";

  /** The value of a constant string argument {@code name}. */
  static String constantText(Expression e, String name) {
    if (!e.foldable() || !(e.dataType() instanceof org.apache.spark.sql.types.StringType)) {
      throw new IllegalArgumentException("hdp_spark: `" + name + "` must be a constant string");
    }
    Object v = e.eval(null);
    if (v == null) {
      throw new IllegalArgumentException("hdp_spark: `" + name + "` must not be null");
    }
    return v.toString();
  }

  @Override
  public String ruleName() {
    return "org.hdpspark.HdpQueryRule";
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.resolveOperatorsUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return Placeholder.aggregateHolding(p, HdpQuery.class);
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        Aggregate a = (Aggregate) p;
        boolean grouped = !a.groupingExpressions().isEmpty();
        boolean[] publicGroups = {false};
        String[] keyList = {null};
        String[] selection = {null};
        String[] unit = {null, null};  // the first privacy unit's decision and fingerprint
        boolean[] other = {false};
        String[] persons = {null};  // a partial-DP Column's privacy unit (PersonRows)
        boolean[] unbounded = {false};  // an hdp_spark aggregator without it
        String[] ldp = {null, null, null};  // a local-DP unit's decision, secret, fingerprint
        int[] releases = {0};
        List<NamedExpression> out = new ArrayList<>();
        for (NamedExpression e : CollectionConverters.asJava(a.aggregateExpressions())) {
          out.add((NamedExpression) ((Expression) e).transformUp(
              new AbstractPartialFunction<Expression, Expression>() {
                @Override
                public boolean isDefinedAt(Expression x) {
                  return x instanceof AggregateExpression
                      && ((AggregateExpression) x).aggregateFunction() instanceof HdpRelease
                      && Placeholder.holds(x, HdpQuery.class);
                }

                @Override
                public Expression apply(Expression x) {
                  HdpRelease cells = (HdpRelease) ((AggregateExpression) x).aggregateFunction();
                  String groups = cells.groups();
                  if (grouped && HdpQuery.NONE.equals(groups)) {
                    throw new IllegalArgumentException(UNDECIDED);
                  }
                  publicGroups[0] |= grouped && HdpQuery.PUBLIC.equals(groups);
                  if (PersonRows.holds(groups)) {
                    if (grouped) {
                      throw new IllegalArgumentException(PersonRows.GROUPED);
                    }
                    if (persons[0] != null && !persons[0].equals(groups)) {
                      throw new IllegalArgumentException(PersonRows.DIFFER);
                    }
                    persons[0] = groups;
                  } else {
                    unbounded[0] = true;
                  }
                  if (groups.startsWith(SelectionPlan.PREFIX)) {
                    String decided = UnitPlan.decision(groups);
                    if (selection[0] != null && !selection[0].equals(decided)) {
                      throw new IllegalArgumentException(KEYS_DIFFER);
                    }
                    selection[0] = decided;
                  } else if (!HdpQuery.CELLS.equals(groups)) {
                    other[0] = true;
                  }
                  if (groups.startsWith(KeyFilter.PREFIX)) {
                    if (!grouped) {
                      throw new IllegalArgumentException(KEYS_GLOBAL);
                    }
                    if (keyList[0] != null && !keyList[0].equals(groups)) {
                      throw new IllegalArgumentException(KEYS_DIFFER);
                    }
                    keyList[0] = groups;
                  }
                  boolean release = !HdpQuery.CELLS.equals(groups);
                  if (release) {  // what can change the rows under one fingerprint: refused
                    QueryGuard.check(a, x);
                  }
                  String fp = QueryFingerprint.of(a.child(), a.groupingExpressions(), x);
                  releases[0]++;
                  if (LdpUnitPlan.holds(groups)) {
                    if (grouped) {
                      throw new IllegalArgumentException(LdpUnitPlan.GROUPED);
                    }
                    ldp[0] = groups;
                    ldp[1] = query(x).secret;
                    ldp[2] = fp;
                  }
                  if (unit[0] == null && UnitPlan.holds(groups)) {
                    unit[0] = groups;
                    unit[1] = fp;
                  }
                  return x.transformUp(new AbstractPartialFunction<Expression, Expression>() {
                    @Override
                    public boolean isDefinedAt(Expression y) {
                      return y instanceof HdpQuery || (release && y instanceof HdpRelease);
                    }

                    @Override
                    public Expression apply(Expression y) {
                      if (y instanceof HdpRelease) {  // a release: its ε rules fail the query
                        return ((HdpRelease) y).strict();
                      }
                      return Literal.create(UTF8String.fromString(fp), DataTypes.StringType);
                    }
                  });
                }
              }));
        }
        Seq<NamedExpression> aggs = CollectionConverters.asScala(out).toSeq();
        if (ldp[0] != null) {  // one report per person, below the aggregate (LdpUnitPlan)
          if (releases[0] > 1) {
            throw new IllegalArgumentException(LdpUnitPlan.ALONE);
          }
          return LdpUnitPlan.build(a, out, ldp[0], ldp[1], ldp[2]);
        }
        if (selection[0] != null && SelectionPlan.marked(out)) {
          if (other[0]) {
            throw new IllegalArgumentException(KEYS_DIFFER);
          }
          LogicalPlan base = grouped ? withoutNullKeys(a) : a.child();
          if (unit[0] != null) {  // the privacy unit's bounding below the aggregate (rows
            // of null or NaN keys count for their person's ε, then are dropped: UnitPlan)
            return UnitPlan.build(a, out, a.child(), base, unit[0], unit[1]);
          }
          return SelectionPlan.build(a, out, base);
        }
        LogicalPlan child = a.child();
        if (persons[0] != null) {  // global: no key list, no public groups (refused above)
          if (unbounded[0]) {  // another aggregator would read the bounded rows
            throw new IllegalArgumentException(PersonRows.DIFFER);
          }
          return a.copy(a.groupingExpressions(), aggs, PersonRows.bounded(child, persons[0]),
              a.hint());
        }
        if (keyList[0] != null) {  // only rows of the public keys (never null or NaN)
          child = new Filter(KeyFilter.condition(
              CollectionConverters.asJava(a.groupingExpressions()), keyList[0]), child);
        } else if (publicGroups[0]) {
          child = withoutNullKeys(a);
        }
        return a.copy(a.groupingExpressions(), aggs, child, a.hint());
      }
    });
  }

  /** The {@link HdpQuery} placeholder of {@code e} (it holds one: the rule's test). */
  private static HdpQuery query(Expression e) {
    if (e instanceof HdpQuery) {
      return (HdpQuery) e;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      if (Placeholder.holds(c, HdpQuery.class)) {
        return query(c);
      }
    }
    throw new IllegalStateException("hdp_spark: no query placeholder");
  }

  /**
   * The aggregate's input without the rows whose grouping value is null or NaN: the release
   * API's rule (a public key is never null or NaN, so such rows are in no released group),
   * applied to the Column aggregators so that both publish the same groups. The filter runs
   * below the aggregate, so every aggregate of the query, hdp_spark's or Spark's, sees the
   * same rows and no output row has a null or NaN key. Public facts only: the grouping
   * values are declared public by the group decision.
   */
  static LogicalPlan withoutNullKeys(Aggregate a) {
    Expression keep = null;
    for (Expression g : CollectionConverters.asJava(a.groupingExpressions())) {
      Expression ok = new IsNotNull(g);
      if (g.dataType() instanceof DoubleType || g.dataType() instanceof FloatType) {
        ok = new And(ok, new Not(new IsNaN(g)));
      }
      keep = keep == null ? ok : new And(keep, ok);
    }
    return new Filter(keep, a.child());
  }
}
