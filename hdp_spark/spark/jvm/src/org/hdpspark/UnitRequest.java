package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * The release API's request for its bounding operator on Spark Connect, where the client has
 * no py4j to call {@link UnitBound#bound}: {@code df.where(hdp_unit_bound(id, eps, G, R,
 * <secret>, group | null, code...))} ({@code hdp_spark.spark.privacy_unit}). The function
 * builds this marker; the extension's analyzer rule ({@link Resolve}, post-hoc resolution)
 * replaces the filter holding it by the operator's node over the filter's input
 * ({@link UnitBound#node}, the plan {@link UnitBound#bound} builds on classic Spark): the
 * rows with an id, the same columns, ε (a double) replaced by ε_person. Spark's planner
 * then adds the one shuffle by the id (none where the input is already partitioned by it)
 * and the one sort the operator requires, through the strategy {@link HdpExtensions}
 * injects.
 *
 * <p>Why a filter and not a hint: an unrecognized hint is dropped silently (and every hint
 * under {@code spark.sql.optimizer.disableHints}), which would release unbounded rows; a
 * marker the rule did not replace cannot be evaluated, so the query fails (fail closed).
 *
 * <p>Privacy: the bounding key arrives as the secret argument ({@link HdpSecret}, built by
 * {@link HdpConnectSecret} from the request's bytes, never a literal; the builder refuses
 * anything else) and moves into this marker's non-printed field, then into the node's
 * {@code Spec}, which prints the public bounds only: no printed plan (parsed, analyzed,
 * optimized, physical; every explain mode) shows it, and it is no literal of any plan. The
 * node's output is the operator's: which of person p's rows are kept, and ε_p, are a
 * function of p's own rows, the key and the public bounds only ({@link UnitBound}'s
 * argument), the same rows as classic Spark and pandas for the same key.
 *
 * <p>The same marker carries the release API's request for the local-DP one-report operator
 * ({@link LdpUnitBound}): {@code df.where(hdp_ldp_keep(id, safe eps, index, q, 'aggregator
 * name', <secret>))}, which the rule replaces by that operator's node over the filter's
 * input, its key moved the same way (the node prints the aggregator's name only).
 */
public final class UnitRequest extends Expression implements java.io.Serializable {

  private static final long serialVersionUID = 1L;

  /** The SQL function of the request. */
  static final String FUNCTION = "hdp_unit_bound";

  static final String USAGE = "hdp_unit_bound takes (id, eps, max_groups, max_rows, secret "
      + "key, group or null, code...): the release API's request, the key built by "
      + "hdp_spark, never a literal";

  /** The SQL function of the local-DP one-report request. */
  static final String LDP_FUNCTION = "hdp_ldp_keep";

  static final String LDP_USAGE = "hdp_ldp_keep takes (id, safe eps, index, q, constant "
      + "aggregator name, secret key): the release API's request, the key built by "
      + "hdp_spark, never a literal";

  private final Seq<Expression> columns;  // id, eps, [group], codes
  private final boolean grouped;
  private final int maxGroups;
  private final int maxRows;
  private final String key;  // not a product element: never printed
  private final String ldp;  // the local-DP aggregator's name; "": the bounding request

  public UnitRequest(Seq<Expression> columns, boolean grouped, int maxGroups, int maxRows,
      String key, String ldp) {
    this.columns = columns;
    this.grouped = grouped;
    this.maxGroups = maxGroups;
    this.maxRows = maxRows;
    this.key = key;
    this.ldp = ldp;
  }

  /** Builds the marker from the function's arguments. */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = CollectionConverters.asJava(args);
      if (in.size() < 6 || !(in.get(4) instanceof HdpSecret)) {
        throw new IllegalArgumentException(USAGE);
      }
      int maxGroups = bound(in.get(2));
      int maxRows = bound(in.get(3));
      Expression group = in.get(5);
      boolean grouped = !(group.foldable() && group.eval(null) == null);
      List<Expression> cols = new ArrayList<>(Arrays.asList(in.get(0), in.get(1)));
      if (grouped) {
        cols.add(group);
      }
      cols.addAll(in.subList(6, in.size()));
      return new UnitRequest(HdpCells.seq(cols), grouped, maxGroups, maxRows,
          ((HdpSecret) in.get(4)).material(), "");
    }

    private static int bound(Expression e) {
      Object v = e.foldable() ? e.eval(null) : null;
      if (!(v instanceof Integer) || (Integer) v < 1) {
        throw new IllegalArgumentException(USAGE + " (the bounds: constant integers >= 1)");
      }
      return (Integer) v;
    }
  }

  /** Builds the local-DP one-report marker from {@code hdp_ldp_keep}'s arguments. */
  static final class LdpBuilder
      extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = CollectionConverters.asJava(args);
      if (in.size() != 6 || !(in.get(5) instanceof HdpSecret) || !in.get(4).foldable()
          || !(in.get(4).dataType() instanceof org.apache.spark.sql.types.StringType)
          || in.get(4).eval(null) == null) {
        throw new IllegalArgumentException(LDP_USAGE);
      }
      return new UnitRequest(HdpCells.seq(in.subList(0, 4)), false, 1, 1,
          ((HdpSecret) in.get(5)).material(), in.get(4).eval(null).toString());
    }
  }

  /** The analyzer rule: a filter on this marker becomes the operator's node. */
  public static final class Resolve extends Rule<LogicalPlan> {
    @Override
    public String ruleName() {
      return "org.hdpspark.UnitRequest.Resolve";
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      return plan.resolveOperatorsUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
        @Override
        public boolean isDefinedAt(LogicalPlan p) {
          return p instanceof Filter && ((Filter) p).condition() instanceof UnitRequest
              && p.resolved();
        }

        @Override
        public LogicalPlan apply(LogicalPlan p) {
          Filter f = (Filter) p;
          return ((UnitRequest) f.condition()).bound(f.child());
        }
      });
    }
  }

  /** The operator's node over {@code child}'s rows with an id. */
  LogicalPlan bound(LogicalPlan child) {
    List<Attribute> out = CollectionConverters.asJava(child.output());
    List<Expression> cols = CollectionConverters.asJava(columns);
    int[] at = new int[cols.size()];
    for (int i = 0; i < at.length; i++) {
      at[i] = -1;
      for (int j = 0; j < out.size() && cols.get(i) instanceof Attribute; j++) {
        if (out.get(j).exprId().equals(((Attribute) cols.get(i)).exprId())) {
          at[i] = j;
        }
      }
      if (at[i] < 0) {
        throw new IllegalArgumentException((ldp.isEmpty() ? USAGE : LDP_USAGE)
            + " (its columns: columns of its input)");
      }
    }
    int first = grouped ? 3 : 2;
    LogicalPlan rows = new Filter(new IsNotNull(out.get(at[0])), child);
    if (!ldp.isEmpty()) {
      return LdpUnitBound.node(rows, at[0], at[1], at[2], at[3], key, ldp);
    }
    return UnitBound.node(rows, at[0], grouped ? at[2] : -1,
        Arrays.copyOfRange(at, first, at.length), at[1], maxGroups, maxRows, key, true);
  }

  @Override
  public Seq<Expression> children() {
    return columns;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public DataType dataType() {
    return DataTypes.BooleanType;
  }

  @Override
  public Object eval(InternalRow input) {
    throw new IllegalStateException("hdp_spark: " + prettyName() + " is never evaluated: "
        + "the extension's analyzer rule replaces it by its operator");
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    throw new IllegalStateException("hdp_spark: " + prettyName() + " cannot be "
        + "code-generated");
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> kids) {
    return new UnitRequest(kids.toList(), grouped, maxGroups, maxRows, key, ldp);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return columns;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public Seq<Object> otherCopyArgs() {  // makeCopy/clone keep the bounds and the key
    return CollectionConverters.asScala(Arrays.asList((Object) grouped, maxGroups, maxRows,
        key, ldp)).toSeq();
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof UnitRequest;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof UnitRequest)) {
      return false;
    }
    UnitRequest r = (UnitRequest) o;
    return r.columns.equals(columns) && r.grouped == grouped && r.maxGroups == maxGroups
        && r.maxRows == maxRows && r.key.equals(key) && r.ldp.equals(ldp);
  }

  @Override
  public int hashCode() {
    return columns.hashCode() * 31 + maxGroups * 7 + maxRows;
  }

  @Override
  public String prettyName() {
    return ldp.isEmpty() ? FUNCTION : LDP_FUNCTION;
  }

  /** The public parameters: the bounds, or the local-DP aggregator's name. */
  private String shown() {
    return ldp.isEmpty() ? ", max_groups=" + maxGroups + ", max_rows=" + maxRows
        : ", " + ldp;
  }

  @Override
  public String toString() {
    return prettyName() + "(" + columns.mkString(", ") + shown() + ")";
  }

  @Override
  public String sql() {
    List<String> parts = new ArrayList<>();
    for (Expression c : CollectionConverters.asJava(columns)) {
      parts.add(c.sql());
    }
    return prettyName() + "(" + String.join(", ", parts) + shown() + ")";
  }
}
