package org.hdpspark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.aggregate.ImperativeAggregate;
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The privacy unit's bounding as one aggregate per person with a bounded state and map-side
 * partial aggregation ({@code hdp_unit_bound(group rank, group, row rank, codes, payload,
 * max_groups, max_rows)}, grouped by the person): the payloads of the rows the rule of
 * {@code hdp_spark.core.privacy_unit.spec} keeps, as an array. The ranks are computed by
 * native expressions below it (SHA-256 under the bounding key, as the window form); this
 * aggregate only keeps the {@code max_groups} groups of smallest (group rank, group) and in
 * each the {@code max_rows} rows of smallest (row rank, codes) — see {@link UnitState} for
 * why dropping in partial states keeps the same rows. Rows with a negative group (outside
 * the public keys) are skipped; the person's ε (a minimum over all their rows) is a native
 * aggregate beside this one.
 *
 * <p>Memory: a person's state holds at most {@code max_groups × max_rows} rows (public
 * bounds). Privacy: exact private rows; the release's cells aggregate them before anything
 * leaves Spark.
 */
public final class HdpUnitBound extends TypedImperativeAggregate<UnitState>
    implements java.io.Serializable {

  private static final long serialVersionUID = 1L;

  public static final String FUNCTION = "hdp_unit_bound";

  static final int GRANK = 0;
  static final int GROUP = 1;
  static final int RRANK = 2;
  static final int CODES = 3;
  static final int PAYLOAD = 4;
  static final int MAX_GROUPS = 5;
  static final int MAX_ROWS = 6;
  static final int ARITY = 7;

  final Expression[] kids;
  final int mutableOffset;
  final int inputOffset;
  private transient UnsafeProjection project;

  public HdpUnitBound(Seq<Expression> children, int mutableOffset, int inputOffset) {
    this.kids = CollectionConverters.asJava(children).toArray(new Expression[0]);
    this.mutableOffset = mutableOffset;
    this.inputOffset = inputOffset;
  }

  private int bound(int i) {
    return ((Number) kids[i].eval(null)).intValue();
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    boolean ok = kids.length == ARITY
        && kids[GRANK].dataType() instanceof LongType
        && kids[GROUP].dataType() instanceof LongType
        && kids[RRANK].dataType() instanceof LongType
        && kids[CODES].dataType() instanceof StringType
        && kids[PAYLOAD].dataType() instanceof StructType
        && kids[MAX_GROUPS].foldable() && kids[MAX_GROUPS].dataType() instanceof IntegerType
        && kids[MAX_ROWS].foldable() && kids[MAX_ROWS].dataType() instanceof IntegerType;
    if (!ok || bound(MAX_GROUPS) < 1 || bound(MAX_ROWS) < 1) {
      throw new IllegalArgumentException("hdp_unit_bound takes (group rank bigint, group "
          + "bigint, row rank bigint, codes string, payload struct, constant max_groups int "
          + ">= 1, constant max_rows int >= 1)");
    }
    return TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public UnitState createAggregationBuffer() {
    return new UnitState(bound(MAX_GROUPS), bound(MAX_ROWS));
  }

  @Override
  public UnitState update(UnitState s, InternalRow input) {
    Object gv = kids[GROUP].eval(input);
    if (gv == null || (Long) gv < 0) {
      return s;
    }
    UnitState.Group g = s.group((Long) kids[GRANK].eval(input), (Long) gv);
    if (g == null) {
      return s;
    }
    long rank = (Long) kids[RRANK].eval(input);
    UTF8String codes = (UTF8String) kids[CODES].eval(input);
    if (!s.admits(g, rank, codes)) {
      return s;
    }
    if (project == null) {
      project = UnsafeProjection.create((StructType) kids[PAYLOAD].dataType());
    }
    InternalRow payload = (InternalRow) kids[PAYLOAD].eval(input);
    UnsafeRow copy = project.apply(payload).copy();
    s.add(g, new UnitState.Row(rank, codes.clone(), copy));
    return s;
  }

  @Override
  public UnitState merge(UnitState a, UnitState b) {
    a.merge(b);
    return a;
  }

  @Override
  public Object eval(UnitState s) {
    return new GenericArrayData(s.rows().toArray());
  }

  @Override
  public byte[] serialize(UnitState s) {
    return s.toBytes();
  }

  @Override
  public UnitState deserialize(byte[] bytes) {
    return UnitState.fromBytes(bytes);
  }

  @Override
  public DataType dataType() {
    return DataTypes.createArrayType(kids[PAYLOAD].dataType(), false);
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
    return new HdpUnitBound(newChildren, mutableOffset, inputOffset);
  }

  @Override
  public int mutableAggBufferOffset() {
    return mutableOffset;
  }

  @Override
  public ImperativeAggregate withNewMutableAggBufferOffset(int offset) {
    return new HdpUnitBound(children(), offset, inputOffset);
  }

  @Override
  public int inputAggBufferOffset() {
    return inputOffset;
  }

  @Override
  public ImperativeAggregate withNewInputAggBufferOffset(int offset) {
    return new HdpUnitBound(children(), mutableOffset, offset);
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0: return children();
      case 1: return mutableOffset;
      case 2: return inputOffset;
      default: throw new IndexOutOfBoundsException(String.valueOf(n));
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpUnitBound;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof HdpUnitBound)) {
      return false;
    }
    HdpUnitBound h = (HdpUnitBound) o;
    return Arrays.equals(kids, h.kids) && mutableOffset == h.mutableOffset
        && inputOffset == h.inputOffset;
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(kids) * 31 + mutableOffset * 7 + inputOffset;
  }

  /** Builds hdp_unit_bound(...) (see the class comment). */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = new ArrayList<>(CollectionConverters.asJava(args));
      return new HdpUnitBound(HdpCells.seq(in), 0, 0);
    }
  }
}
