package org.hdpspark;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.aggregate.ImperativeAggregate;
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the native aggregates of hdp_spark ({@link HdpCells}, {@link HdpRecords},
 * {@link HdpUsers}, {@link HdpLdpCells}) share as Spark {@code TypedImperativeAggregate}s: the
 * children, the buffer offsets and the strict flag, the copies Spark makes of them, the
 * case-class fields Spark reads ({@code productElement}: the query fingerprint writes them
 * out), equality, serialization of the state and the group decision of the query
 * placeholder. A subclass gives its constructor ({@link #copy}), the index of its query
 * placeholder, its state's reader and its result; the fields are the same as each class
 * had alone: children, offsets, and {@code strict} only where it {@link #hasStrict()}.
 */
abstract class HdpAggregate<S extends HdpAggregate.State> extends TypedImperativeAggregate<S>
    implements java.io.Serializable, HdpRelease {

  private static final long serialVersionUID = 1L;

  /** A native aggregate's state: written to bytes between the partial and final stages. */
  interface State {
    byte[] toBytes();
  }

  final Expression[] kids;
  final int mutableOffset;
  final int inputOffset;
  final boolean strict;

  HdpAggregate(Seq<Expression> children, int mutableOffset, int inputOffset, boolean strict) {
    this.kids = CollectionConverters.asJava(children).toArray(new Expression[0]);
    this.mutableOffset = mutableOffset;
    this.inputOffset = inputOffset;
    this.strict = strict;
  }

  /** The same aggregate with these children, offsets and strictness (the constructor). */
  abstract HdpAggregate<S> copy(Seq<Expression> children, int mutableOffset, int inputOffset,
      boolean strict);

  /** The index of the {@link HdpQuery} placeholder (or the constant fingerprint). */
  abstract int queryIndex();

  /** Whether {@code strict} is one of the aggregate's fields (a constructor argument). */
  boolean hasStrict() {
    return false;
  }

  /** The aggregator's group decision while the query placeholder is in place (else null). */
  @Override
  public String groups() {
    Expression q = kids[queryIndex()];
    return q instanceof HdpQuery ? ((HdpQuery) q).groups : null;
  }

  @Override
  public byte[] serialize(S s) {
    return s.toBytes();
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public Seq<Expression> children() {
    return HdpCells.seq(Arrays.asList(kids));
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    return copy(newChildren, mutableOffset, inputOffset, strict);
  }

  @Override
  public int mutableAggBufferOffset() {
    return mutableOffset;
  }

  @Override
  public ImperativeAggregate withNewMutableAggBufferOffset(int offset) {
    return copy(children(), offset, inputOffset, strict);
  }

  @Override
  public int inputAggBufferOffset() {
    return inputOffset;
  }

  @Override
  public ImperativeAggregate withNewInputAggBufferOffset(int offset) {
    return copy(children(), mutableOffset, offset, strict);
  }

  @Override
  public int productArity() {
    return hasStrict() ? 4 : 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return children();
      case 1: return mutableOffset;
      case 2: return inputOffset;
      case 3:
        if (hasStrict()) {
          return strict;
        }
        throw new IndexOutOfBoundsException(String.valueOf(n));
      default: throw new IndexOutOfBoundsException(String.valueOf(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that != null && that.getClass() == getClass();
  }

  @Override
  public boolean equals(Object o) {
    if (!canEqual(o)) {
      return false;
    }
    HdpAggregate<?> h = (HdpAggregate<?>) o;
    return Arrays.equals(kids, h.kids) && mutableOffset == h.mutableOffset
        && inputOffset == h.inputOffset && strict == h.strict;
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(kids) * 31 + mutableOffset * 7 + inputOffset + (strict ? 1 : 0);
  }
}
