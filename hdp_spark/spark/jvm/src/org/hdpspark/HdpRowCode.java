package org.hdpspark;

import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The integer code one hdp_spark aggregator reads from a row (a mean's fixed-point value, a
 * histogram's category code), computed by that aggregator's own {@link HdpCells} rules
 * ({@link HdpCells#rowCode}): the codes the privacy unit's row rank reads ({@link UnitPlan}),
 * the same integers the release API's bounding reads (a test checks the kept rows equal).
 * Children: the aggregator's {@code hdp_cells} arguments. Never a release: an internal
 * column of the bounding step, dropped before the aggregate.
 */
final class HdpRowCode extends Expression implements CodegenFallback, java.io.Serializable {

  private static final long serialVersionUID = 1L;

  private final Seq<Expression> kids;
  private transient HdpCells cells;

  HdpRowCode(Seq<Expression> kids) {
    this.kids = kids;
  }

  @Override
  public Seq<Expression> children() {
    return kids;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public DataType dataType() {
    return DataTypes.LongType;
  }

  @Override
  public Object eval(InternalRow input) {
    if (cells == null) {
      cells = new HdpCells(kids, 0, 0);
    }
    return cells.rowCode(input);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> newChildren) {
    return new HdpRowCode(newChildren);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return kids;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpRowCode;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpRowCode && ((HdpRowCode) o).kids.equals(kids);
  }

  @Override
  public int hashCode() {
    return 0x5243 ^ kids.hashCode();
  }

  @Override
  public String prettyName() {
    return "hdp_row_code";
  }

  static List<Expression> list(Seq<Expression> s) {
    return CollectionConverters.asJava(s);
  }
}
