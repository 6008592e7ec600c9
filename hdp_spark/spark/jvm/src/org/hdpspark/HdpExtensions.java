package org.hdpspark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkStrategy;

import scala.Option;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * hdp_spark's Spark extension: the {@code hdp_cells} aggregate function, the rules that give
 * it its group and its query, and the privacy unit's bounding operator (the rule that
 * answers the release API's requests on Spark Connect, {@link UnitRequest}: the bounding
 * operator and the local-DP one-report operator {@link LdpUnitBound}; and the planner
 * strategy). Install with {@code spark.sql.extensions=org.hdpspark.HdpExtensions} (what
 * {@code hdp_spark.spark.configure(builder)} sets), or call {@link #register} on a running
 * classic session.
 */
public final class HdpExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {

  public static final String FUNCTION = "hdp_cells";

  static FunctionIdentifier id() {
    return new FunctionIdentifier(FUNCTION, Option.empty(), Option.empty());
  }

  /** The fully qualified name of a session (temporary) function, as Spark 4.3 requires. */
  static FunctionIdentifier sessionId() {
    return new FunctionIdentifier(FUNCTION, Option.apply("session"), Option.apply("system"));
  }

  static ExpressionInfo info() {
    return new ExpressionInfo(HdpCells.class.getName(), FUNCTION);
  }

  /** Builds hdp_cells(eps, category, rules, grid, categories, groups, values...) with the
   * group placeholder fifth and the query placeholder (carrying the constant group decision
   * {@code groups}: 'none', 'public' or 'cells', see {@link HdpQuery}) seventh. */
  static final class Builder extends AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = new ArrayList<>(CollectionConverters.asJava(args));
      if (in.size() < 6) {
        throw new IllegalArgumentException("hdp_cells takes (eps, category, rules, grid, "
            + "categories, groups, [value, lower, upper, fill]...), got " + in.size()
            + " arguments");
      }
      in.add(HdpCells.GROUP, new HdpGroup());
      in.set(HdpCells.QUERY, new HdpQuery(HdpQueryRule.constantText(in.get(HdpCells.QUERY),
          "groups")));
      return new HdpCells(HdpCells.seq(in), 0, 0);
    }
  }

  /** Builds hdp_selected(value, weight): see {@link HdpSelected}. */
  static final class SelectedBuilder extends AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = CollectionConverters.asJava(args);
      if (in.size() != 2) {
        throw new IllegalArgumentException("hdp_selected takes (value, weight), got "
            + in.size() + " arguments");
      }
      return new HdpSelected(in.get(0), in.get(1));
    }
  }

  /** Builds hdp_selection('weight' | 'parts'): see {@link HdpSelection}. */
  static final class SelectionBuilder extends AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = CollectionConverters.asJava(args);
      if (in.size() != 1) {
        throw new IllegalArgumentException("hdp_selection takes one constant string, got "
            + in.size() + " arguments");
      }
      return new HdpSelection(HdpQueryRule.constantText(in.get(0), "what"));
    }
  }

  static final class RuleBuilder
      extends AbstractFunction1<org.apache.spark.sql.SparkSession, Rule<LogicalPlan>> {
    @Override
    public Rule<LogicalPlan> apply(org.apache.spark.sql.SparkSession s) {
      return new HdpGroupRule();
    }
  }

  static final class QueryRuleBuilder
      extends AbstractFunction1<org.apache.spark.sql.SparkSession, Rule<LogicalPlan>> {
    @Override
    public Rule<LogicalPlan> apply(org.apache.spark.sql.SparkSession s) {
      return new HdpQueryRule();
    }
  }

  /** The rule that turns the release API's request on Spark Connect into the bounding
   * operator ({@link UnitRequest}). */
  static final class RequestRuleBuilder
      extends AbstractFunction1<org.apache.spark.sql.SparkSession, Rule<LogicalPlan>> {
    @Override
    public Rule<LogicalPlan> apply(org.apache.spark.sql.SparkSession s) {
      return new UnitRequest.Resolve();
    }
  }

  /** The planner strategy of the privacy unit's bounding operator ({@link UnitBound}'s
   * node, which {@link UnitPlan} puts under a Column or SQL aggregate): injected so that
   * every session built with the extension, classic or a Spark Connect server, plans it. */
  static final class StrategyBuilder
      extends AbstractFunction1<org.apache.spark.sql.SparkSession, SparkStrategy> {
    @Override
    public SparkStrategy apply(org.apache.spark.sql.SparkSession s) {
      return new UnitBound.Planner();
    }
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions ext) {
    OwnErrorLogFilter.install();
    ext.injectFunction(new Tuple3<>(id(), info(), new Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSqlMean.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSqlMean.class.getName(), HdpSqlMean.FUNCTION), new HdpSqlMean()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSqlHistogram.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSqlHistogram.class.getName(), HdpSqlHistogram.FUNCTION),
        new HdpSqlHistogram()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSqlAggregate.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSqlAggregate.class.getName(), HdpSqlAggregate.FUNCTION),
        new HdpSqlAggregate()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpRecords.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpRecords.class.getName(), HdpRecords.FUNCTION),
        new HdpRecords.Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpUsers.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpUsers.class.getName(), HdpUsers.FUNCTION),
        new HdpUsers.Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpLdpCells.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpLdpCells.class.getName(), HdpLdpCells.FUNCTION),
        new HdpLdpCells.Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSelected.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSelected.class.getName(), HdpSelected.FUNCTION),
        new SelectedBuilder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSelection.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSelection.class.getName(), HdpSelection.FUNCTION),
        new SelectionBuilder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSqlUserMean.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSqlUserMean.class.getName(), HdpSqlUserMean.FUNCTION),
        new HdpSqlUserMean()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(HdpSecretRank.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(HdpSecretRank.class.getName(), HdpSecretRank.FUNCTION),
        new HdpSecretRank.Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(UnitRequest.FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(UnitRequest.class.getName(), UnitRequest.FUNCTION),
        new UnitRequest.Builder()));
    ext.injectFunction(new Tuple3<>(
        new FunctionIdentifier(UnitRequest.LDP_FUNCTION, Option.empty(), Option.empty()),
        new ExpressionInfo(UnitRequest.class.getName(), UnitRequest.LDP_FUNCTION),
        new UnitRequest.LdpBuilder()));
    for (String[] f : HdpSqlLdp.FUNCTIONS) {
      ext.injectFunction(new Tuple3<>(new FunctionIdentifier(f[0], Option.empty(), Option.empty()),
          new ExpressionInfo(HdpSqlLdp.class.getName(), f[0]),
          new HdpSqlLdp(f[0], f[1], f[2])));
    }
    for (String[] f : HdpSqlPartial.FUNCTIONS) {
      ext.injectFunction(new Tuple3<>(
          new FunctionIdentifier(f[0], Option.empty(), Option.empty()),
          new ExpressionInfo(HdpSqlPartial.class.getName(), f[0]), new HdpSqlPartial(f[0], f[1])));
    }
    ext.injectOptimizerRule(new RuleBuilder());
    ext.injectPostHocResolutionRule(new QueryRuleBuilder());
    ext.injectPostHocResolutionRule(new RequestRuleBuilder());
    ext.injectPlannerStrategy(new StrategyBuilder());
    return BoxedUnit.UNIT;
  }

  /** Registers the function and the rule on a running classic session (idempotent). */
  public static void register(org.apache.spark.sql.classic.SparkSession session) {
    OwnErrorLogFilter.install();
    registerOne(session, FUNCTION, info(), new Builder());
    registerOne(session, HdpSqlMean.FUNCTION,
        new ExpressionInfo(HdpSqlMean.class.getName(), HdpSqlMean.FUNCTION), new HdpSqlMean());
    registerOne(session, HdpSqlHistogram.FUNCTION,
        new ExpressionInfo(HdpSqlHistogram.class.getName(), HdpSqlHistogram.FUNCTION),
        new HdpSqlHistogram());
    registerOne(session, HdpSqlAggregate.FUNCTION,
        new ExpressionInfo(HdpSqlAggregate.class.getName(), HdpSqlAggregate.FUNCTION),
        new HdpSqlAggregate());
    registerOne(session, HdpRecords.FUNCTION,
        new ExpressionInfo(HdpRecords.class.getName(), HdpRecords.FUNCTION),
        new HdpRecords.Builder());
    registerOne(session, HdpUsers.FUNCTION,
        new ExpressionInfo(HdpUsers.class.getName(), HdpUsers.FUNCTION),
        new HdpUsers.Builder());
    registerOne(session, HdpLdpCells.FUNCTION,
        new ExpressionInfo(HdpLdpCells.class.getName(), HdpLdpCells.FUNCTION),
        new HdpLdpCells.Builder());
    registerOne(session, HdpSelected.FUNCTION,
        new ExpressionInfo(HdpSelected.class.getName(), HdpSelected.FUNCTION),
        new SelectedBuilder());
    registerOne(session, HdpSelection.FUNCTION,
        new ExpressionInfo(HdpSelection.class.getName(), HdpSelection.FUNCTION),
        new SelectionBuilder());
    registerOne(session, HdpSqlUserMean.FUNCTION,
        new ExpressionInfo(HdpSqlUserMean.class.getName(), HdpSqlUserMean.FUNCTION),
        new HdpSqlUserMean());
    registerOne(session, HdpSecretRank.FUNCTION,
        new ExpressionInfo(HdpSecretRank.class.getName(), HdpSecretRank.FUNCTION),
        new HdpSecretRank.Builder());
    for (String[] f : HdpSqlLdp.FUNCTIONS) {
      registerOne(session, f[0], new ExpressionInfo(HdpSqlLdp.class.getName(), f[0]),
          new HdpSqlLdp(f[0], f[1], f[2]));
    }
    for (String[] f : HdpSqlPartial.FUNCTIONS) {
      registerOne(session, f[0], new ExpressionInfo(HdpSqlPartial.class.getName(), f[0]),
          new HdpSqlPartial(f[0], f[1]));
    }
    scala.collection.immutable.Seq<Rule<LogicalPlan>> rules =
        session.experimental().extraOptimizations();
    for (Rule<LogicalPlan> r : CollectionConverters.asJava(rules)) {
      if (r instanceof HdpGroupRule) {
        return;
      }
    }
    List<Rule<LogicalPlan>> more = new ArrayList<>(CollectionConverters.asJava(rules));
    more.add(new HdpGroupRule());
    session.experimental().extraOptimizations_$eq(CollectionConverters.asScala(more).toSeq());
  }

  /**
   * Gives this session's local-DP SQL functions the registration's secret key for
   * {@code 'unit', column, 1, 1} (64 hex digits; {@code hdp_spark.spark.sql_ldp}), held in
   * a JVM map by the session's SQLConf object. Classic PySpark calls it through py4j, Spark
   * Connect through {@link HdpConnectSecret}.
   *
   * <p>Privacy: the key lives in that map only (not in the session conf's settings, which
   * {@code SET}, the UI's environment page and the event log's SQL execution events show);
   * the builder puts it in the calls' {@link HdpQuery} placeholder, which no printed form of
   * a plan shows. Another session (newSession, cloneSession: another SQLConf) has no key
   * until its own registration.
   */
  public static void registerLdpUnitKey(org.apache.spark.sql.classic.SparkSession session,
      String secret) {
    if (secret == null || !secret.matches("[0-9a-f]{64}")) {
      throw new IllegalArgumentException("hdp_spark: a secret argument must be 64 hex digits");
    }
    HdpSqlLdp.unitKey(session.sessionState().conf(), secret);
  }

  private static void registerOne(org.apache.spark.sql.classic.SparkSession session,
      String name, ExpressionInfo info,
      AbstractFunction1<Seq<Expression>, Expression> builder) {
    try {
      session.sessionState().functionRegistry().registerFunction(
          new FunctionIdentifier(name, Option.empty(), Option.empty()), info, builder);
    } catch (AssertionError e) {
      session.sessionState().functionRegistry().registerFunction(
          new FunctionIdentifier(name, Option.apply("session"), Option.apply("system")), info,
          builder);
    }
  }

  /**
   * Whether the session's analyzer has the query rule (sessions built with
   * {@code spark.sql.extensions=org.hdpspark.HdpExtensions}): the Column and SQL aggregators
   * need it; a rule cannot be added to a running session's analyzer.
   */
  public static boolean analyzerReady(org.apache.spark.sql.classic.SparkSession session) {
    for (Rule<LogicalPlan> r : CollectionConverters.asJava(
        session.sessionState().analyzer().postHocResolutionRules())) {
      if (r instanceof HdpQueryRule) {
        return true;
      }
    }
    return false;
  }

  /** Whether the session can evaluate hdp_cells (its function registry knows it). */
  public static boolean installed(org.apache.spark.sql.classic.SparkSession session) {
    return session.sessionState().functionRegistry().functionExists(id());
  }
}
