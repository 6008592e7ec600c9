package org.hdpspark;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;

import scala.jdk.javaapi.CollectionConverters;

/**
 * A leaf that a rule of the extension replaces ({@link HdpGroup} by an optimizer rule,
 * {@link HdpQuery} by an analyzer rule): never code-generated, never folded, and the
 * helpers both rules use to find the aggregates that still hold one.
 */
abstract class Placeholder extends Expression implements java.io.Serializable {

  private static final long serialVersionUID = 1L;

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return HdpCells.seq(new java.util.ArrayList<>());
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    throw new IllegalStateException("hdp_spark: " + prettyName() + " cannot be code-generated");
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> newChildren) {
    return this;
  }

  @Override
  public boolean foldable() {
    return false;
  }

  /** Whether {@code e} holds a placeholder of class {@code kind}. */
  static boolean holds(Expression e, Class<? extends Placeholder> kind) {
    if (kind.isInstance(e)) {
      return true;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      if (holds(c, kind)) {
        return true;
      }
    }
    return false;
  }

  /** Whether {@code p} is a resolved aggregate one of whose expressions holds {@code kind}. */
  static boolean aggregateHolding(LogicalPlan p, Class<? extends Placeholder> kind) {
    if (!(p instanceof Aggregate) || !p.resolved()) {
      return false;
    }
    for (NamedExpression e : CollectionConverters.asJava(((Aggregate) p).aggregateExpressions())) {
      if (holds((Expression) e, kind)) {
        return true;
      }
    }
    return false;
  }
}
