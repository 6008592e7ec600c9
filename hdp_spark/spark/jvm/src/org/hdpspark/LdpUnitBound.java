package org.hdpspark;

import java.io.Serializable;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The local-DP one-report rule under a privacy unit ({@code hdp_spark.core.privacy_unit.ldp}:
 * one report per person) as one streaming physical operator, {@code HdpLdpUnitBound}: the
 * release API's {@code keep_one_report} on classic Spark ({@link #keep}, through py4j) and on
 * Spark Connect (the request {@code hdp_ldp_keep}, {@link UnitRequest}), and the Columns' and
 * SQL functions' rule below their aggregate ({@link LdpUnitPlan}, {@link #build}). It
 * replaces the native plan of one window specification (kept as the fallback where the
 * extension is absent, or where the session sets {@code hdp_spark.unitOperator} to false).
 *
 * <p>The operator requires its input clustered by the id and sorted by it — Spark's planner
 * inserts the one shuffle and the one sort (by the id only: the window plan's sort by (id,
 * ε, index, q) measured several times dearer, its ties compared row by row) — and reads
 * each partition person by person over Spark's own rows ({@link UnitStream.Stream} over
 * {@link Reports}). Per person, in the order their rows come: the smallest safe ε so far,
 * and the rows at it by their (index, q), in the order Spark's sort would give them (a
 * sorted map: equal (index, q) rows held as one copy and a count, a run); a smaller ε
 * starts them anew, a larger one is read and not held. At the person's end, ε_person is the
 * smallest, m the candidates' count, and the kept row is the candidate at position
 * {@code pmod(rank, m)} in that order, the rank computed once for the person: {@link
 * HdpSecretRank#rank} of the person's length-tagged id text ({@link UnitStream.Id}) under
 * the key and aggregator name, the number {@code hdp_ldp_position} gives each of the
 * person's rows on the window plan, so the same position, hence (up to rows tying on (ε,
 * index, q)) the same report as the window plan and pandas. Memory: one person's distinct
 * candidate (index, q) values, never a partition.
 *
 * <p>Privacy (why this keeps the rule and its argument): the kept report and ε_person are a
 * function of the person's own rows, the key and the aggregator's name only (the stream
 * holds one person at a time). A run stands for rows equal in safe ε, index and q, which
 * every local-DP aggregator reads alone ({@link HdpLdpCells}: the level of ε, the index, q;
 * the raw columns for their types only; the release API's cells the same encodings): rows
 * of one run add the same to every cell, so keeping a run's first row for any of them
 * releases what keeping that row would (the order of rows in a run is Spark's, unfixed on
 * the window plan too), and the position — a PRF of the key, the name and
 * the person, uniform on [m] and unknown to whoever reads the output — reads no value. The
 * order of a person's rows changes nothing (the candidates and their order are the
 * smallest ε's rows, sorted); a person's rows reaching the operator split (input not sorted
 * by the id) would keep two reports, so a smaller id after a larger one fails the task (fail
 * closed), as does an ε that is not the safe ε (null, NaN or negative: the callers make it
 * safe below the operator). The
 * key lives in the node's {@link Spec}, not a product element: no printed plan shows it
 * (the node prints the aggregator's name).
 */
public final class LdpUnitBound {

  private LdpUnitBound() {}

  /**
   * The release API's kept reports of {@code framed} (classic Spark, through py4j): its rows
   * with an id, one per person, its columns in order. {@code eps}: the safe ε (a double);
   * {@code index}, {@code q}: the aggregator's codes (a bigint; a bigint or an array of
   * bigints); {@code key}: the release's bounding key (64 hex digits); {@code name}: the
   * aggregator's name.
   */
  public static Dataset<Row> keep(Dataset<Row> framed, String id, String eps, String index,
      String q, String key, String name) {
    org.apache.spark.sql.classic.Dataset<Row> rows =
        (org.apache.spark.sql.classic.Dataset<Row>) framed.where(
            org.apache.spark.sql.functions.col(id).isNotNull());
    StructType schema = rows.schema();
    org.apache.spark.sql.classic.SparkSession session = rows.sparkSession();
    UnitBound.plan(session);
    return org.apache.spark.sql.classic.Dataset.ofRows(session, node(rows.logicalPlan(),
        schema.fieldIndex(id), schema.fieldIndex(eps), schema.fieldIndex(index),
        schema.fieldIndex(q), key, name));
  }

  /** The node keeping one report per person of {@code rows} (their rows with an id; the
   * columns at {@code idAt}, {@code epsAt}, {@code indexAt}, {@code qAt}), over their
   * columns: what {@link #keep}, {@link UnitRequest}'s rule and {@link #build} build. */
  static Node node(LogicalPlan rows, int idAt, int epsAt, int indexAt, int qAt, String key,
      String name) {
    if (key == null || !key.matches("[0-9a-f]{64}")) {
      throw new IllegalArgumentException("hdp_spark: a bounding key must be 64 hex digits");
    }
    StructType schema = rows.schema();
    char idKind = UnitBound.kindOrZero(schema.apply(idAt).dataType(), true);
    DataType q = schema.apply(qAt).dataType();
    boolean array = q instanceof ArrayType
        && ((ArrayType) q).elementType() instanceof LongType;
    if (idKind == 0 || !(schema.apply(epsAt).dataType() instanceof DoubleType)
        || !(schema.apply(indexAt).dataType() instanceof LongType)
        || !(array || q instanceof LongType)) {
      throw new IllegalArgumentException("hdp_spark: the local-DP one-report operator reads "
          + "an integral or string id, a double epsilon, a bigint index and a bigint or "
          + "array<bigint> q, got " + schema.simpleString());
    }
    Spec spec = new Spec(idAt, idKind, epsAt, indexAt, qAt, array, name,
        HdpSecretRank.prefix(key, name), schema);
    return new Node(rows.output(), rows, spec);
  }

  /**
   * The Columns' and SQL functions' route ({@link LdpUnitPlan}): the kept reports of
   * {@code base}'s rows with an id, as {@code base}'s columns (those the aggregate does not
   * {@code read}: null, they cross the shuffle as no column) then the safe ε {@code eps}.
   * {@code index} and {@code q}: the aggregator's codes over the safe ε.
   */
  static LogicalPlan build(LogicalPlan base, Attribute person, AttributeSet read, Alias eps,
      Alias index, Alias q, String key, String name) {
    List<Attribute> input = CollectionConverters.asJava(base.output());
    List<NamedExpression> cols = new ArrayList<>();
    int idAt = UnitBoundPlan.carried(input, person, read, cols);
    int epsAt = cols.size();
    cols.addAll(Arrays.asList(eps, index, q));
    LogicalPlan rows = new Project(UnitPlan.seq(cols), new Filter(new IsNotNull(person), base));
    return UnitBoundPlan.restored(input, cols, eps.toAttribute(),
        node(rows, idAt, epsAt, epsAt + 1, epsAt + 2, key, name));
  }

  /** The operator's parameters (serialized into each task). */
  static final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;
    final int idAt;
    final char idKind;
    final int epsAt;
    final int indexAt;
    final int qAt;
    final boolean array;  // q an array<bigint> (a vector mean), else a bigint
    final String name;
    private final byte[] prefix;  // the rank's text before the person: holds the key
    final StructType schema;

    Spec(int idAt, char idKind, int epsAt, int indexAt, int qAt, boolean array, String name,
        byte[] prefix, StructType schema) {
      this.idAt = idAt;
      this.idKind = idKind;
      this.epsAt = epsAt;
      this.indexAt = indexAt;
      this.qAt = qAt;
      this.array = array;
      this.name = name;
      this.prefix = prefix;
      this.schema = schema;
    }

    /** Equal parameters (the key included) keep the same reports (a re-analysed request
     * gives an equal node); the hash code does not read the key. */
    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Spec)) {
        return false;
      }
      Spec s = (Spec) o;
      return s.idAt == idAt && s.idKind == idKind && s.epsAt == epsAt && s.indexAt == indexAt
          && s.qAt == qAt && s.array == array && s.name.equals(name)
          && Arrays.equals(s.prefix, prefix) && s.schema.equals(schema);
    }

    @Override
    public int hashCode() {
      return Objects.hash(idAt, epsAt, indexAt, qAt, name);
    }

    /** What a printed plan shows: the aggregator's (public) name, never the key. */
    @Override
    public String toString() {
      return "one report per person, " + name;
    }
  }

  /** The logical node: one report per person of its child (same columns). */
  public static final class Node extends UnitBound.Logical<Spec> {
    private static final long serialVersionUID = 1L;

    public Node(Seq<Attribute> columns, LogicalPlan child, Spec spec) {
      super(columns, child, spec);
    }

    @Override
    UnitBound.Logical<Spec> over(LogicalPlan kid) {
      return new Node(columns, kid, spec);
    }

    @Override
    public String nodeName() {
      return "HdpLdpUnitBound";
    }
  }

  /** The physical node: one shuffle by the id and one sort by it below (required), one
   * map. */
  public static final class Exec extends UnitBound.Physical<Spec> {
    private static final long serialVersionUID = 1L;

    public Exec(Seq<Attribute> columns, SparkPlan child, Spec spec) {
      super(columns, child, spec);
    }

    @Override
    UnitBound.Physical<Spec> over(SparkPlan kid) {
      return new Exec(columns, kid, spec);
    }

    @Override
    UnitBound.Streamer streamer() {
      return new Keep(spec);
    }

    @Override
    public String nodeName() {
      return "HdpLdpUnitBound";
    }

    @Override
    public Seq<Distribution> requiredChildDistribution() {
      return UnitBound.clustered(columns.apply(spec.idAt));
    }

    @Override
    public Seq<Seq<SortOrder>> requiredChildOrdering() {
      return UnitBound.ascending(List.of(columns.apply(spec.idAt)));
    }
  }

  /** One task's stream: the kept report of each person in turn. */
  static final class Keep implements UnitBound.Streamer {
    private static final long serialVersionUID = 1L;
    private final Spec spec;

    Keep(Spec spec) {
      this.spec = spec;
    }

    @Override
    public Iterator<InternalRow> stream(Iterator<InternalRow> rows) {
      return new UnitStream.Stream(new Reports(spec), rows);
    }
  }

  /** Spark's order of doubles (NaN largest, -0.0 equal to 0.0), as the sort's. */
  static int compareDoubles(double a, double b) {
    return a == b ? 0 : Double.compare(a, b);
  }

  /** The order of two rows' (index, q), as the sort's (nulls first; arrays element by
   * element, nulls first, then by length). */
  static int compareCodes(Spec spec, InternalRow a, InternalRow b) {
    int c = compareLongs(a, b, spec.indexAt);
    if (c != 0 || !spec.array) {
      return c != 0 ? c : compareLongs(a, b, spec.qAt);
    }
    boolean na = a.isNullAt(spec.qAt);
    boolean nb = b.isNullAt(spec.qAt);
    if (na || nb) {
      return Boolean.compare(!na, !nb);
    }
    ArrayData x = a.getArray(spec.qAt);
    ArrayData y = b.getArray(spec.qAt);
    int n = Math.min(x.numElements(), y.numElements());
    for (int i = 0; i < n; i++) {
      boolean ex = x.isNullAt(i);
      boolean ey = y.isNullAt(i);
      c = ex || ey ? Boolean.compare(!ex, !ey) : Long.compare(x.getLong(i), y.getLong(i));
      if (c != 0) {
        return c;
      }
    }
    return Integer.compare(x.numElements(), y.numElements());
  }

  private static int compareLongs(InternalRow a, InternalRow b, int at) {
    boolean na = a.isNullAt(at);
    boolean nb = b.isNullAt(at);
    if (na || nb) {
      return Boolean.compare(!na, !nb);
    }
    return Long.compare(a.getLong(at), b.getLong(at));
  }

  /** One person's candidates while their rows stream in, in any order: the smallest safe
   * ε so far and the distinct (index, q) of the rows at it, in the rule's order, each held
   * as one row's copy and a count (a run); a smaller ε starts them anew. */
  static final class Reports implements UnitStream.State {
    private final Spec spec;
    private final UnitStream.Id id;
    private final MessageDigest sha = HdpSecretRank.digest();
    private final TreeMap<InternalRow, long[]> runs;
    private double eps;
    private final UnitStream.Copier copier;

    Reports(Spec spec) {
      this.spec = spec;
      this.id = new UnitStream.Id(spec.idAt, spec.idKind);
      this.copier = new UnitStream.Copier(spec.schema);
      this.runs = new TreeMap<>((a, b) -> compareCodes(spec, a, b));
    }

    @Override
    public void reset(InternalRow row) {
      id.set(row);
      runs.clear();
    }

    @Override
    public int compareId(InternalRow row) {
      return id.compare(row);
    }

    @Override
    public void add(InternalRow row) {
      double level = row.isNullAt(spec.epsAt) ? Double.NaN : row.getDouble(spec.epsAt);
      if (!(level > 0.0 || (level == 0.0 && 1.0 / level > 0.0))) {
        throw new IllegalStateException("hdp_spark: the local-DP one-report operator reads "
            + "the safe epsilon (null, NaN and negative as 0), got another value");
      }
      int c = runs.isEmpty() ? -1 : compareDoubles(level, eps);
      if (c > 0) {
        return;  // above the person's smallest ε so far: not a candidate, not held
      }
      if (c < 0) {  // a smaller ε: the candidates so far are not the person's
        runs.clear();
        eps = level;
      }
      long[] count = runs.get(row);
      if (count != null) {
        count[0]++;
      } else {
        runs.put(copier.copy(row), new long[] {1L});
      }
    }

    /** The candidate at position pmod(rank, m) in the (index, q) order: its run's row. */
    @Override
    public void emit(List<InternalRow> out) {
      long m = 0;
      for (long[] count : runs.values()) {
        m += count[0];
      }
      long at = Math.floorMod(HdpSecretRank.rank(sha, spec.prefix, id.tagged()), m);
      for (Map.Entry<InternalRow, long[]> run : runs.entrySet()) {
        if (at < run.getValue()[0]) {
          out.add(run.getKey());
          return;
        }
        at -= run.getValue()[0];
      }
    }
  }
}
