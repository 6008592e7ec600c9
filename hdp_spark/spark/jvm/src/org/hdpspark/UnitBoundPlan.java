package org.hdpspark;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.types.DataTypes;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The privacy unit of a Column or SQL aggregate ({@link UnitPlan}) bounded by the release
 * API's streaming operator ({@link UnitBound}'s node {@code HdpUnitBound}) instead of native
 * windows:
 *
 * <pre>
 *   Project       [the input's columns (those the aggregate does not read: null), ε_person]
 *   HdpUnitBound  [max_groups=G, max_rows=R: the kept rows, ε replaced by ε_person]
 *   Project       [the id, the columns the aggregate reads, group position or key text,
 *                  ε, codes]
 *   (grouped: the positions, as on the native path: a broadcast join or the key list)
 *   Repartition   [by the id column]
 *   Filter        [person not null]
 * </pre>
 *
 * <p>With the session's map-side pre-bound on ({@link UnitPreBound}, off by default) the
 * positions and codes come first (no exchange: a broadcast join, the key list or the key
 * text), {@code HdpUnitPreBound} reads them, and the operator's required clustering adds
 * the one exchange by the id above it (no repartition node).
 *
 * <p>The rows with an id cross one shuffle by the id itself (the repartition, which the
 * operator's required clustering then accepts as it is: no second exchange), the positions
 * and codes are computed after it, and Spark's planner adds the one sort by the id the
 * operator requires. The planner strategy that turns the node into its physical operator is
 * injected by {@link HdpExtensions} (every session whose analyzer holds the rule that builds
 * this plan holds that strategy too: classic sessions built with the extension and Spark
 * Connect servers started with it).
 *
 * <p>Privacy: the same rule and the same ranks as the native path (and pandas): which of
 * person p's rows are kept, and ε_p, are a function of p's own rows, the query's bounding
 * key and the public bounds only (the argument is {@link UnitBound}'s comment; the tests
 * check the same rows and numbers as the release API). The query's bounding key travels in
 * the node's parameters, which no printed plan shows (it prints the bounds): unlike the
 * native path, the key is no literal of the plan. It orders rows, it keys no noise.
 */
final class UnitBoundPlan {

  private UnitBoundPlan() {}

  /** The session setting that turns the operator off (then the native windows bound). */
  static final String CONF = "hdp_spark.unitOperator";

  /** Whether the operator bounds this session's queries (the setting, default on). */
  static boolean enabled() {
    String v = org.apache.spark.sql.internal.SQLConf.get().getConfString(CONF, "true");
    return !"false".equalsIgnoreCase(v.trim());
  }

  /**
   * The bounded rows (the input's columns, then ε_person last) or null where the operator
   * does not read the columns (an id neither integral nor string: refused before; kept as
   * the native path's guard). {@code read}: the input columns the aggregate reads (the
   * others cross the shuffle, the sort and the operator as no column: they come out null,
   * unread); {@code position}: over the shuffled rows, those rows with what makes each
   * row's group, and that group (an integral position, negative outside the keys, or a key
   * text, null outside); null for a global release. {@code eps}: the row's ε; {@code
   * codes}: the integral codes the cells read.
   */
  static LogicalPlan build(LogicalPlan base, Attribute person, AttributeSet read,
      Function<LogicalPlan, Object[]> position, Expression eps, List<Expression> codes,
      int maxGroups, int maxRows, String key) {
    char idKind = UnitBound.kindOrZero(person.dataType(), true);
    if (idKind == 0) {
      return null;
    }
    for (Expression c : codes) {
      if (UnitBound.kindOrZero(c.dataType(), false) == 0) {
        return null;
      }
    }
    // pre-bound: the positions and codes are computed before the shuffle (no exchange:
    // a broadcast join, the key list or the key text), the pre-bound reads them and the
    // operator's required clustering adds the exchange by the id above it; else shuffled
    // by the id itself first, the positions and codes computed after the shuffle
    boolean pre = UnitPreBound.enabled();
    LogicalPlan withId = new Filter(new IsNotNull(person), base);
    LogicalPlan shuffled = pre ? withId : new RepartitionByExpression(
        UnitPlan.seq(List.of((Expression) person)), withId, Option.empty(), Option.empty());
    LogicalPlan framed = shuffled;
    Expression group = null;
    if (position != null) {
      Object[] framing = position.apply(shuffled);  // {plan, group expression}
      framed = (LogicalPlan) framing[0];
      group = (Expression) framing[1];
    }
    List<Attribute> input = CollectionConverters.asJava(base.output());
    List<NamedExpression> cols = new ArrayList<>();
    int idAt = carried(input, person, read, cols);
    int groupAt = -1;
    char groupKind = 'n';
    if (group != null) {
      groupKind = UnitBound.kindOrZero(group.dataType(), true);
      if (groupKind == 0) {
        return null;
      }
      groupAt = cols.size();
      cols.add(group instanceof Attribute ? (Attribute) group
          : SelectionPlan.alias(group, "__pu_group"));
    }
    int epsAt = cols.size();
    Alias epsA = SelectionPlan.alias(UnitPlan.cast(eps, DataTypes.DoubleType), "__pu_eps");
    cols.add(epsA);
    int[] codeAt = new int[codes.size()];
    char[] codeKind = new char[codes.size()];
    for (int i = 0; i < codes.size(); i++) {
      codeAt[i] = cols.size();
      codeKind[i] = UnitBound.kindOrZero(codes.get(i).dataType(), false);
      cols.add(SelectionPlan.alias(codes.get(i), "__pu_c" + i));
    }
    LogicalPlan rows = new Project(UnitPlan.seq(cols), framed);
    UnitBound.Spec spec = new UnitBound.Spec(idAt, idKind, groupAt, groupKind, codeAt,
        codeKind, epsAt, maxGroups, maxRows, key, true, rows.schema());
    // the node's output: its child's columns, the ε column now holding ε_person
    LogicalPlan node = new UnitBound.Node(rows.output(),
        pre ? new UnitPreBound.PreNode(rows.output(), rows, spec) : rows, spec);
    return restored(input, cols, epsA.toAttribute(), node);
  }

  /** Appends to {@code cols} the {@code input} columns an operator carries: the id
   * {@code person} and those the aggregate {@code read}s (in the input's order); returns
   * the id's position. */
  static int carried(List<Attribute> input, Attribute person, AttributeSet read,
      List<NamedExpression> cols) {
    int idAt = -1;
    for (Attribute a : input) {
      if (a.exprId().equals(person.exprId())) {
        idAt = cols.size();
        cols.add(a);
      } else if (read.contains(a)) {
        cols.add(a);
      }
    }
    return idAt;
  }

  /** The {@code input}'s columns over {@code node} (those not among {@code cols}: null,
   * unread), then {@code eps}. */
  static LogicalPlan restored(List<Attribute> input, List<NamedExpression> cols,
      Attribute eps, LogicalPlan node) {
    List<NamedExpression> kept = new ArrayList<>();
    for (Attribute a : input) {
      kept.add(cols.contains(a) ? a : SelectionPlan.alias(Literal.create(null, a.dataType()),
          a.name()));
    }
    kept.add(eps);
    return new Project(UnitPlan.seq(kept), node);
  }
}
