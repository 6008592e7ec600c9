package org.hdpspark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.physical.ClusteredDistribution;
import org.apache.spark.sql.catalyst.plans.physical.ClusteredDistribution$;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The privacy unit's bounding rule of the release API on classic Spark, as one streaming
 * physical operator (called from Python: {@code hdp_spark.spark.privacy_unit.bound_rows};
 * and put under a Column or SQL aggregate by the analyzer rule: {@link UnitBoundPlan},
 * planned by the strategy {@link HdpExtensions} injects). The operator requires its input
 * clustered by the id and sorted by it within each partition — Spark's planner inserts the
 * one shuffle and the one sort — and reads each partition person by person over Spark's own
 * rows (no conversion to external rows),
 * keeping for the current person only what the rule can still keep (that state:
 * {@link UnitStream}). Below the shuffle, where the session turns it on, the map-side
 * pre-bound {@link UnitPreBound} ({@code HdpUnitPreBound}) applies the same rule to chunks
 * of each input partition, so that only a superset of the kept rows (each carrying its
 * chunk's smallest ε) crosses the shuffle: the rows and ε kept here are the same (the
 * argument: that class's comment).
 *
 * <p>Per person: ε_person = the smallest safe ε (null, NaN, negative: 0; +∞ kept) of ALL
 * their rows, those outside the keys included (never emitted); at most {@code maxGroups}
 * groups, the ones with the smallest (group rank, group), a group rank computed only once
 * the person has more groups than that (before, every group is kept whatever the ranks);
 * within a kept group at most {@code maxRows} rows, the ones with the smallest (row rank,
 * codes text) in a bounded heap, row ranks computed only once the group has more rows than
 * that. Memory: one person's at most maxGroups × (maxRows + 1) rows (and the ranks of the
 * groups they dropped), never a partition. The ranks are those of {@code
 * hdp_spark.core.privacy_unit.spec}: the first 60 bits of SHA-256 over the UTF-8 bytes of
 * {@code group_rank_text} / {@code row_rank_text}, built here from the same parts (the
 * bounding key, the length-prefixed id text — its length in code points, as Python's and
 * Spark's — the group's decimal position or key text, the codes in decimal joined by ',',
 * nulls skipped as {@code concat_ws} skips them). Groups and codes texts compare as Spark
 * compares strings (bytes).
 *
 * <p>Privacy (why this keeps the rule): which of person p's rows are kept, and ε_p, are
 * computed here from p's own rows and the bounding key only — the stream holds one person at
 * a time, and the order of p's rows in it (Spark's, possibly different on a recomputed
 * partition) changes nothing: the kept groups are the smallest (rank, group) pairs and the
 * kept rows the smallest (rank, codes) pairs whatever the order they arrive in; rows tying
 * on both have equal codes, interchangeable for every statistic, as on the other paths. The
 * ranks are the same numbers as the pandas engine's and the native path's, so all three keep
 * the same rows (tests/privacy_unit/test_unit_bound_jvm.py). If a person's rows ever reached
 * the operator split (input not sorted by the id), each part would be bounded alone and the
 * person could exceed the bounds: the operator checks that ids only increase and fails the
 * task otherwise (fail closed). The bounding key travels in a field no printed plan shows
 * (the node prints its public bounds only); it orders rows, it keys no noise.
 */
public final class UnitBound {

  private UnitBound() {}

  /**
   * The bounded rows of {@code df}: its rows with an id, its columns in order, {@code eps}
   * as a double holding the person's ε. {@code group}: the column of each row's group (an
   * integral position, negative or null outside the keys; or a string key text, null
   * outside), or null for a global release; {@code codes}: the integral code columns;
   * {@code sorted}: stream each partition sorted by the id (false: hold a partition's
   * persons in a hash map, the measured alternative).
   */
  public static Dataset<Row> bound(Dataset<Row> df, String id, String group, String[] codes,
      String eps, int maxGroups, int maxRows, String key, boolean sorted) {
    Column person = functions.col(id);
    org.apache.spark.sql.classic.Dataset<Row> rows = (org.apache.spark.sql.classic.Dataset<Row>)
        df.where(person.isNotNull()).withColumn(eps, functions.col(eps).cast("double"));
    StructType schema = rows.schema();
    int[] codeAt = new int[codes.length];
    for (int i = 0; i < codes.length; i++) {
      codeAt[i] = schema.fieldIndex(codes[i]);
    }
    org.apache.spark.sql.classic.SparkSession session = rows.sparkSession();
    plan(session);
    return org.apache.spark.sql.classic.Dataset.ofRows(session, node(rows.logicalPlan(),
        schema.fieldIndex(id), group == null ? -1 : schema.fieldIndex(group), codeAt,
        schema.fieldIndex(eps), maxGroups, maxRows, key, sorted));
  }

  /**
   * The node bounding {@code rows} (their rows with an id; the columns at {@code idAt},
   * {@code groupAt} (-1: a global release), {@code codeAt} and {@code epsAt}, the ε column
   * a double), over their columns: what {@link #bound} builds from py4j and
   * {@link UnitRequest}'s rule from the release API's request on Spark Connect.
   */
  static Node node(LogicalPlan rows, int idAt, int groupAt, int[] codeAt, int epsAt,
      int maxGroups, int maxRows, String key, boolean sorted) {
    if (key == null || !key.matches("[0-9a-f]{64}")) {
      throw new IllegalArgumentException("hdp_spark: a bounding key must be 64 hex digits");
    }
    if (maxGroups < 1 || maxRows < 1) {
      throw new IllegalArgumentException("hdp_spark: the bounds must be at least 1");
    }
    StructType schema = rows.schema();
    char[] codeKind = new char[codeAt.length];
    for (int i = 0; i < codeAt.length; i++) {
      codeKind[i] = kind(schema.apply(codeAt[i]).dataType(), false, "code");
    }
    if (!(schema.apply(epsAt).dataType() instanceof DoubleType)) {
      throw new IllegalArgumentException("hdp_spark: the bounding operator reads its epsilon "
          + "column as a double, got type " + schema.apply(epsAt).dataType().simpleString());
    }
    Spec spec = new Spec(idAt, kind(schema.apply(idAt).dataType(), true, "id"), groupAt,
        groupAt < 0 ? 'n' : kind(schema.apply(groupAt).dataType(), true, "group"), codeAt,
        codeKind, epsAt, maxGroups, maxRows, key, sorted, schema);
    return new Node(rows.output(), UnitPreBound.over(rows, spec), spec);
  }

  /** 'l' long, 'i' int, 's' short, 'b' byte (each read as a long), 'S' string. */
  private static char kind(DataType t, boolean strings, String what) {
    char k = kindOrZero(t, strings);
    if (k == 0) {
      throw new IllegalArgumentException(
          "hdp_spark: the bounding operator reads no " + what + " column of type "
              + t.simpleString());
    }
    return k;
  }

  /** {@link #kind}, or 0 for a type the operator does not read. */
  static char kindOrZero(DataType t, boolean strings) {
    if (t instanceof LongType) {
      return 'l';
    }
    if (t instanceof IntegerType) {
      return 'i';
    }
    if (t instanceof ShortType) {
      return 's';
    }
    if (t instanceof ByteType) {
      return 'b';
    }
    if (strings && t instanceof StringType) {
      return 'S';
    }
    return 0;
  }

  /** Adds the operator's planner strategy to the session, unless its planner has it
   * already (injected by {@link HdpExtensions}, or added before). Two would be harmless
   * (the planner takes the first strategy's plan); one keeps the planner's list short. */
  static synchronized void plan(org.apache.spark.sql.classic.SparkSession session) {
    for (SparkStrategy s : CollectionConverters.asJava(
        session.sessionState().planner().strategies())) {
      if (s instanceof Planner) {
        return;
      }
    }
    Seq<SparkStrategy> extra = session.experimental().extraStrategies();
    List<SparkStrategy> more = new ArrayList<>(CollectionConverters.asJava(extra));
    more.add(new Planner());
    session.experimental().extraStrategies_$eq(CollectionConverters.asScala(more).toList());
  }

  @SuppressWarnings("unchecked")
  private static <T> Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toList();
  }

  /** The operator's parameters (serialized into each task). */
  static final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;
    final int idAt;
    final char idKind;
    final int groupAt;
    final char groupKind;  // 'n': a global release (every row in group 0)
    final int[] codeAt;
    final char[] codeKind;
    final int epsAt;
    final int maxGroups;
    final int maxRows;
    private final String key;
    final boolean sorted;
    final StructType schema;

    Spec(int idAt, char idKind, int groupAt, char groupKind, int[] codeAt, char[] codeKind,
        int epsAt, int maxGroups, int maxRows, String key, boolean sorted, StructType schema) {
      this.schema = schema;
      this.idAt = idAt;
      this.idKind = idKind;
      this.groupAt = groupAt;
      this.groupKind = groupKind;
      this.codeAt = codeAt;
      this.codeKind = codeKind;
      this.epsAt = epsAt;
      this.maxGroups = maxGroups;
      this.maxRows = maxRows;
      this.key = key;
      this.sorted = sorted;
    }

    /** Equal parameters (the key included) bound the same rows: two analyses of one
     * request (Spark Connect analyzes a plan anew for each query over it) give equal nodes,
     * so a cached bounded table is found again. The hash code does not read the key. */
    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Spec)) {
        return false;
      }
      Spec s = (Spec) o;
      return s.idAt == idAt && s.idKind == idKind && s.groupAt == groupAt
          && s.groupKind == groupKind && Arrays.equals(s.codeAt, codeAt)
          && Arrays.equals(s.codeKind, codeKind) && s.epsAt == epsAt
          && s.maxGroups == maxGroups && s.maxRows == maxRows && s.key.equals(key)
          && s.sorted == sorted && s.schema.equals(schema);
    }

    @Override
    public int hashCode() {
      return Objects.hash(idAt, groupAt, epsAt, maxGroups, maxRows, sorted,
          Arrays.hashCode(codeAt));
    }

    /** What a printed plan shows: the public bounds, never the key. */
    @Override
    public String toString() {
      return "max_groups=" + maxGroups + ", max_rows=" + maxRows
          + (sorted ? "" : ", hashed");
    }
  }

  /** What the operator's node, the pre-bound's ({@link UnitPreBound.PreNode}) and the
   * local-DP one-report operator's ({@link LdpUnitBound.Node}) share: their columns (the
   * child's), the child and the rule's parameters {@code S} (printed as their
   * {@code toString}: public parameters only). */
  abstract static class Logical<S extends Serializable> extends LogicalPlan {
    private static final long serialVersionUID = 1L;
    final Seq<Attribute> columns;
    final LogicalPlan child;
    final S spec;

    Logical(Seq<Attribute> columns, LogicalPlan child, S spec) {
      this.columns = columns;
      this.child = child;
      this.spec = spec;
    }

    /** This node over {@code kid}. */
    abstract Logical<S> over(LogicalPlan kid);

    @Override
    public Seq<Attribute> output() {
      return columns;
    }

    @Override
    public Seq<LogicalPlan> children() {
      return seq(List.of(child));
    }

    @Override
    public LogicalPlan withNewChildrenInternal(IndexedSeq<LogicalPlan> kids) {
      return over(kids.apply(0));
    }

    @Override
    public int productArity() {
      return 3;
    }

    @Override
    public Object productElement(int n) {
      return n == 0 ? columns : n == 1 ? child : spec;
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
      Logical<?> n = (Logical<?>) o;
      return n.spec.equals(spec) && n.columns.equals(columns) && n.child.equals(child);
    }

    @Override
    public int hashCode() {
      return Objects.hash(getClass().getName(), columns, child, spec);
    }
  }

  /** The logical node: the bounded rows of its child (same columns). */
  public static final class Node extends Logical<Spec> {
    private static final long serialVersionUID = 1L;

    public Node(Seq<Attribute> columns, LogicalPlan child, Spec spec) {
      super(columns, child, spec);
    }

    @Override
    Logical<Spec> over(LogicalPlan kid) {
      return new Node(columns, kid, spec);
    }

    @Override
    public String nodeName() {
      return "HdpUnitBound";
    }
  }

  /** What the operator, the pre-bound ({@link UnitPreBound.PreExec}) and the local-DP
   * one-report operator ({@link LdpUnitBound.Exec}) share: one map over each partition of
   * the child's rows, in the node's column order. */
  abstract static class Physical<S extends Serializable> extends SparkPlan {
    private static final long serialVersionUID = 1L;
    final Seq<Attribute> columns;
    final SparkPlan child;
    final S spec;

    Physical(Seq<Attribute> columns, SparkPlan child, S spec) {
      this.columns = columns;
      this.child = child;
      this.spec = spec;
    }

    /** This node over {@code kid}. */
    abstract Physical<S> over(SparkPlan kid);

    /** What each task does with its partition's rows (built on the driver when the node
     * runs: the pre-bound reads its budget then). */
    abstract Streamer streamer();

    @Override
    public Seq<Attribute> output() {
      return columns;
    }

    @Override
    public Seq<SparkPlan> children() {
      return seq(List.of(child));
    }

    @Override
    public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> kids) {
      return over(kids.apply(0));
    }

    @Override
    public RDD<InternalRow> doExecute() {
      Seq<Attribute> in = child.output();
      boolean same = in.size() == columns.size();
      for (int i = 0; same && i < columns.size(); i++) {
        same = in.apply(i).exprId().equals(columns.apply(i).exprId());
      }
      List<Expression> project = new ArrayList<>();
      if (!same) {
        for (Attribute a : CollectionConverters.asJava(columns)) {
          project.add(a);
        }
      }
      return child.execute().mapPartitionsInternal(
          new Partition(streamer(), same ? null : seq(project), in), false,
          scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
    }

    @Override
    public int productArity() {
      return 3;
    }

    @Override
    public Object productElement(int n) {
      return n == 0 ? columns : n == 1 ? child : spec;
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
      Physical<?> n = (Physical<?>) o;
      return n.spec.equals(spec) && n.columns.equals(columns) && n.child.equals(child);
    }

    @Override
    public int hashCode() {
      return Objects.hash(getClass().getName(), columns, child, spec);
    }
  }

  /** The physical node: one shuffle by the id and one sort by it below (required), one map. */
  public static final class Exec extends Physical<Spec> {
    private static final long serialVersionUID = 1L;

    public Exec(Seq<Attribute> columns, SparkPlan child, Spec spec) {
      super(columns, child, spec);
    }

    private Expression person() {
      return columns.apply(spec.idAt);
    }

    @Override
    Physical<Spec> over(SparkPlan kid) {
      return new Exec(columns, kid, spec);
    }

    @Override
    Streamer streamer() {
      return new Bound(spec, null);
    }

    @Override
    public String nodeName() {
      return "HdpUnitBound";
    }

    @Override
    public Seq<Distribution> requiredChildDistribution() {
      return clustered(person());
    }

    @Override
    public Seq<Seq<SortOrder>> requiredChildOrdering() {
      return ascending(spec.sorted ? List.of(person()) : List.of());
    }
  }

  /** The one required distribution of an operator over persons: clustered by the id. */
  static Seq<Distribution> clustered(Expression person) {
    ClusteredDistribution$ d = ClusteredDistribution$.MODULE$;
    return seq(List.of(new ClusteredDistribution(seq(List.of(person)),
        d.apply$default$2(), d.apply$default$3(), d.apply$default$4())));
  }

  /** The one required ordering: by {@code keys} in turn, ascending, nulls first (Spark's
   * default, as a native window's {@code orderBy}). */
  static Seq<Seq<SortOrder>> ascending(List<Expression> keys) {
    List<SortOrder> order = new ArrayList<>();
    for (Expression k : keys) {
      order.add(new SortOrder(k, Ascending$.MODULE$, NullsFirst$.MODULE$,
          seq(new ArrayList<Expression>())));
    }
    return seq(List.of(seq(order)));
  }

  /** Plans {@link Node} as {@link Exec} (and the pre-bound's and the local-DP one-report
   * operator's nodes as theirs). */
  static final class Planner extends SparkStrategy {
    @Override
    public Seq<SparkPlan> apply(LogicalPlan plan) {
      if (plan instanceof Node) {
        Node n = (Node) plan;
        return seq(List.of(new Exec(n.columns, planLater(n.child), n.spec)));
      }
      if (plan instanceof UnitPreBound.PreNode) {
        UnitPreBound.PreNode n = (UnitPreBound.PreNode) plan;
        return seq(List.of(new UnitPreBound.PreExec(n.columns, planLater(n.child), n.spec)));
      }
      if (plan instanceof LdpUnitBound.Node) {
        LdpUnitBound.Node n = (LdpUnitBound.Node) plan;
        return seq(List.of(new LdpUnitBound.Exec(n.columns, planLater(n.child), n.spec)));
      }
      return seq(new ArrayList<>());
    }
  }

  /** What one task does with its partition's rows (in the node's column order). */
  interface Streamer extends Serializable {
    Iterator<InternalRow> stream(Iterator<InternalRow> rows);
  }

  /** The bounding of one partition: the operator's stream ({@link UnitStream}), or with a
   * budget the pre-bound's chunks ({@link UnitPreBound.Chunks}). */
  static final class Bound implements Streamer {
    private static final long serialVersionUID = 1L;
    private final Spec spec;
    private final long[] budget;  // the pre-bound's (persons, bytes); null: the operator

    Bound(Spec spec, long[] budget) {
      this.spec = spec;
      this.budget = budget;
    }

    @Override
    public Iterator<InternalRow> stream(Iterator<InternalRow> rows) {
      UnitStream.Ranks ranks = new UnitStream.Ranks(spec.key);
      return budget != null ? new UnitPreBound.Chunks(spec, ranks, rows, budget)
          : spec.sorted ? new UnitStream.Stream(new UnitStream.Person(spec, ranks), rows)
          : UnitStream.hashed(spec, ranks, rows);
    }
  }

  /** The map over one partition: the child's rows in the node's column order, streamed. */
  static final class Partition extends
      AbstractFunction1<scala.collection.Iterator<InternalRow>,
          scala.collection.Iterator<InternalRow>> implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Streamer streamer;
    private final Seq<Expression> project;  // null: the child's rows are in our column order
    private final Seq<Attribute> input;

    Partition(Streamer streamer, Seq<Expression> project, Seq<Attribute> input) {
      this.streamer = streamer;
      this.project = project;
      this.input = input;
    }

    @Override
    public scala.collection.Iterator<InternalRow> apply(scala.collection.Iterator<InternalRow> it) {
      Iterator<InternalRow> rows = CollectionConverters.asJava(it);
      if (project != null) {
        UnsafeProjection p = UnsafeProjection.create(project, input);
        Iterator<InternalRow> raw = rows;
        rows = new Iterator<InternalRow>() {
          @Override
          public boolean hasNext() {
            return raw.hasNext();
          }

          @Override
          public InternalRow next() {
            return p.apply(raw.next());
          }
        };
      }
      return CollectionConverters.asScala(streamer.stream(rows));
    }
  }
}
