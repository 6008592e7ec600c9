package org.hdpspark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.CreateStruct;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Gives every {@link HdpCells} the grouping values of its aggregate: replaces the
 * {@link HdpGroup} placeholder with a struct of the aggregate's grouping expressions (an empty
 * struct for a global aggregate). Idempotent; leaves other plans untouched.
 */
public final class HdpGroupRule extends Rule<LogicalPlan> {

  @Override
  public String ruleName() {
    return "org.hdpspark.HdpGroupRule";
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return Placeholder.aggregateHolding(p, HdpGroup.class);
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        Aggregate a = (Aggregate) p;
        for (Expression g : CollectionConverters.asJava(a.groupingExpressions())) {
          if (!GroupText.supported(g.dataType())) {
            throw new IllegalArgumentException("hdp_spark: grouping by a column of type "
                + g.dataType().simpleString() + " is not supported by hdp_spark aggregators");
          }
        }
        Expression struct = CreateStruct.apply(a.groupingExpressions());
        List<NamedExpression> out = new ArrayList<>();
        for (NamedExpression e : CollectionConverters.asJava(a.aggregateExpressions())) {
          out.add((NamedExpression) ((Expression) e).transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
              return x instanceof HdpGroup;
            }

            @Override
            public Expression apply(Expression x) {
              return struct;
            }
          }));
        }
        Seq<NamedExpression> aggs = CollectionConverters.asScala(out).toSeq();
        return a.copy(a.groupingExpressions(), aggs, a.child(), a.hint());
      }
    });
  }
}
