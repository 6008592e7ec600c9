package org.hdpspark;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.types.DataType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A Column aggregator released under partition selection ({@code keys=select_keys(...)}):
 * {@code value}, its finalize (which reads the selection's {@link HdpSelection} values), and
 * {@code weight}, the selection's finalize (the group's noisy weight in steps, null when the
 * group is not selected). {@link SelectionPlan} takes it apart at analysis: the weight is
 * computed once per group above the aggregate, the groups without one are filtered out, and
 * the value is computed for the others. Never evaluated.
 */
public final class HdpSelected extends Expression implements java.io.Serializable {

  private static final long serialVersionUID = 1L;

  static final String FUNCTION = "hdp_selected";

  static final String NO_RULE = "hdp_spark: select_keys needs hdp_spark's analyzer rule: build "
      + "the session with hdp_spark.spark.configure(SparkSession.builder...)";

  private final Expression value;
  private final Expression weight;

  public HdpSelected(Expression value, Expression weight) {
    this.value = value;
    this.weight = weight;
  }

  Expression value() {
    return value;
  }

  Expression weight() {
    return weight;
  }

  @Override
  public Seq<Expression> children() {
    return HdpCells.seq(Arrays.asList(value, weight));
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public DataType dataType() {
    return value.dataType();
  }

  @Override
  public boolean foldable() {
    return false;
  }

  @Override
  public Object eval(InternalRow input) {
    throw new IllegalStateException(NO_RULE);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    throw new IllegalStateException(NO_RULE);
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> newChildren) {
    java.util.List<Expression> kids = CollectionConverters.asJava(newChildren);
    return new HdpSelected(kids.get(0), kids.get(1));
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return value;
    }
    if (n == 1) {
      return weight;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpSelected;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpSelected && ((HdpSelected) o).value.equals(value)
        && ((HdpSelected) o).weight.equals(weight);
  }

  @Override
  public int hashCode() {
    return 31 * value.hashCode() + weight.hashCode();
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }
}
