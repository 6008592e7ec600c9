package org.hdpspark;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;

import org.hdpspark.UnitBound.Spec;
import org.hdpspark.UnitStream.Person;
import org.hdpspark.UnitStream.Ranks;

/**
 * The privacy unit's map-side pre-bounding: {@link UnitBound}'s rule applied to each chunk
 * of a person's rows before the shuffle by the id, so that only the rows the rule can still
 * keep (and one carrier of ε) cross it. The node {@code HdpUnitPreBound} sits under {@code
 * HdpUnitBound}: Spark's planner puts the exchange by the id and the sort between them, and
 * the final operator, unchanged, bounds each person's surviving rows.
 *
 * <p>A chunk: the rows of one person that a task holds in a hash map of persons before the
 * map is full ({@link #PERSONS} persons or about {@link #BYTES} bytes, session settings) and
 * is flushed (everything held emitted, the map emptied); a person can have several chunks
 * in a task and chunks in every task. Memory: the map's budget, never a partition. The
 * first rows of each id in a task ({@link #THRESHOLD}, counted per slot of a table of id
 * hashes: ids sharing a slot add up) pass as they are, before the id's person is held:
 * each such row is a chunk of one row, which the rule keeps whole (one group, one row)
 * with its own ε (the final operator reads it as safe as the pre-bound would make it; a
 * row outside the keys carries its ε itself). Light persons then cost no map.
 *
 * <p>Off by default ({@link #CONF}): measured slower than the shuffle and sort of the rows
 * it drops on one machine (its map is bound by memory latency, about 1 µs a row over 100k
 * persons); benchmarks/log/privacy_unit.md.
 *
 * <p>Privacy (why the final rows and ε are exactly those without the pre-bound, for ANY
 * split of a person's rows into chunks): the rule keeps the person's G groups with the
 * smallest (group rank, group) among their in-key groups, and in each kept group the R rows
 * with the smallest (row rank, codes). A globally kept group g is among the G smallest of
 * the person's groups overall, hence among the G smallest of any chunk that holds g (a
 * chunk holds a subset of the groups); a globally kept row is among the R smallest of its
 * group overall, hence among the R smallest of its group in any chunk holding it. Bounding
 * every chunk with the same rule, the same key and the same ranks (those of {@link
 * UnitStream}, shared, not copied) therefore keeps a superset of the final rows; and the
 * rule applied to a superset of the kept rows that is a subset of all rows keeps the same
 * rows (the G smallest groups of the union are those of the whole, the R smallest rows of a
 * group likewise; rows tying on (rank, codes) have equal codes, interchangeable, as
 * today). ε_person must stay the smallest safe ε of ALL the person's rows, the dropped ones
 * and those outside the keys included: every row a chunk emits carries the chunk's smallest
 * safe ε (null, NaN, negative: 0; +∞ kept), and a chunk whose rows all lie outside the keys
 * emits one of them as a carrier (the final operator reads its ε and never emits a row
 * outside the keys), so the final minimum over the emitted rows is the minimum over all the
 * chunks, i.e. over all the person's rows. A chunk with a row inside the keys keeps at least
 * one group, whose rows carry its ε. The pre-bound reads the key in the same field as the
 * final operator (no printed plan shows it) and emits only the input's own rows.
 */
public final class UnitPreBound {

  private UnitPreBound() {}

  /** The session setting that turns the pre-bound on (default off: measured slower on one
   * machine, benchmarks/log/privacy_unit.md). */
  static final String CONF = "hdp_spark.unitPreBound";
  /** The map's budget: at most this many persons held by a task at a time. */
  static final String PERSONS = "hdp_spark.unitPreBound.persons";
  /** The map's budget: at most about this many bytes of held rows and state. */
  static final String BYTES = "hdp_spark.unitPreBound.bytes";
  /** One more than the rows of an id (ids sharing a slot of a counter table add up) that
   * pass as they are, before the id's person is held: 1, every row held. */
  static final String THRESHOLD = "hdp_spark.unitPreBound.from";

  /** Whether the release's bounding gets a pre-bound (the session setting). */
  static boolean enabled() {
    String v = SQLConf.get().getConfString(CONF, "false");
    return "true".equalsIgnoreCase(v.trim());
  }

  /** {@code rows} under a pre-bound when the session has it on, else {@code rows}. */
  static LogicalPlan over(LogicalPlan rows, Spec spec) {
    return enabled() ? new PreNode(rows.output(), rows, spec) : rows;
  }

  private static long setting(String name, long fallback) {
    String v = SQLConf.get().getConfString(name, Long.toString(fallback)).trim();
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("hdp_spark: " + name + " must be a whole number, "
          + "got " + v);
    }
    if (n < 1) {
      throw new IllegalArgumentException("hdp_spark: " + name + " must be at least 1, got "
          + n);
    }
    return n;
  }

  /** The logical node: a superset of the rows {@link UnitBound.Node} keeps, ε the chunk's. */
  public static final class PreNode extends UnitBound.Logical<Spec> {
    private static final long serialVersionUID = 1L;

    public PreNode(Seq<Attribute> columns, LogicalPlan child, Spec spec) {
      super(columns, child, spec);
    }

    @Override
    UnitBound.Logical<Spec> over(LogicalPlan kid) {
      return new PreNode(columns, kid, spec);
    }

    @Override
    public String nodeName() {
      return "HdpUnitPreBound";
    }
  }

  /** The physical node: one map over each input partition, its partitioning kept (a
   * subset of each partition's rows), so an input already clustered by the id gets no
   * exchange. The budget is read when it runs. */
  public static final class PreExec extends UnitBound.Physical<Spec> {
    private static final long serialVersionUID = 1L;

    public PreExec(Seq<Attribute> columns, SparkPlan child, Spec spec) {
      super(columns, child, spec);
    }

    @Override
    UnitBound.Physical<Spec> over(SparkPlan kid) {
      return new PreExec(columns, kid, spec);
    }

    @Override
    UnitBound.Streamer streamer() {
      return new UnitBound.Bound(spec, new long[] {setting(PERSONS, 200_000L),
          setting(BYTES, 64L << 20), setting(THRESHOLD, 9L) - 1});
    }

    @Override
    public Partitioning outputPartitioning() {
      return child.outputPartitioning();
    }

    @Override
    public String nodeName() {
      return "HdpUnitPreBound";
    }
  }

  /** The pre-bound rows of one partition, in any order: chunks of persons in a hash map,
   * flushed whole when the map is full and at the end. */
  static final class Chunks implements Iterator<InternalRow> {
    private final Spec spec;
    private final Ranks ranks;
    private final Iterator<InternalRow> input;
    private final long maxPersons;
    private final long maxBytes;
    private final Map<UTF8String, Person> texts = new HashMap<>();  // string ids
    private long[] keys = new long[1024];  // integral ids: open addressing, linear probing
    private Person[] slots = new Person[1024];
    private final List<Person> persons = new ArrayList<>();  // held, in the order they came
    private final ArrayDeque<Person> spare = new ArrayDeque<>();
    private final List<InternalRow> ready = new ArrayList<>();
    private int next;
    private long bytes;
    private final int threshold;
    private final int[] seen;  // rows seen per id hash (ids sharing a slot add up)
    private InternalRow passed;  // an input row let through as it is, next to return

    Chunks(Spec spec, Ranks ranks, Iterator<InternalRow> input, long[] budget) {
      this.spec = spec;
      this.ranks = ranks;
      this.input = input;
      this.maxPersons = budget[0];
      this.maxBytes = budget[1];
      this.threshold = (int) budget[2];
      this.seen = threshold > 0 ? new int[1 << 18] : null;
    }

    @Override
    public boolean hasNext() {
      if (passed != null) {
        return true;
      }
      while (next >= ready.size()) {
        ready.clear();
        next = 0;
        if (!fill()) {
          return false;
        }
        if (passed != null) {
          return true;
        }
      }
      return true;
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      if (passed != null) {
        InternalRow row = passed;
        passed = null;
        return row;
      }
      return ready.get(next++);
    }

    /** Reads rows until one passes as it is ({@code passed}) or the map is full, then
     * flushed into {@code ready}; false when the partition is exhausted and nothing is
     * held. */
    private boolean fill() {
      while (input.hasNext()) {
        InternalRow row = input.next();
        UTF8String text = null;
        long id = 0;
        int at = -1;
        Person p;
        if (spec.idKind == 'S') {
          text = row.getUTF8String(spec.idAt);
        } else {
          id = UnitStream.integral(row, spec.idAt, spec.idKind);
        }
        if (seen != null) {  // the id's first rows pass as they are: chunks of one row
          int h = text != null ? text.hashCode() : (int) ((id * 0x9E3779B97F4A7C15L) >>> 32);
          int i = (h ^ (h >>> 14)) & (seen.length - 1);
          if (seen[i] < threshold) {
            seen[i]++;
            passed = row;
            return true;
          }
        }
        if (text != null) {
          p = texts.get(text);
        } else {
          at = slot(id);
          p = slots[at];
        }
        if (p == null) {
          if (persons.size() >= maxPersons) {
            flush();
            at = text == null ? slot(id) : -1;
          }
          p = spare.isEmpty() ? new Person(spec, ranks, true) : spare.pop();
          p.reset(row);
          if (text != null) {
            texts.put(text.clone(), p);
          } else {
            keys[at] = id;
            slots[at] = p;
            if (2 * (persons.size() + 1) > slots.length) {
              grow();
            }
          }
          persons.add(p);
          p.add(row);
          bytes += p.held();
        } else {
          long before = p.held();
          p.add(row);
          bytes += p.held() - before;
        }
        if (bytes > maxBytes) {
          flush();
        }
        if (!ready.isEmpty()) {
          return true;
        }
      }
      flush();
      return !ready.isEmpty();
    }

    /** The slot of integral id {@code id}: its person's, or the empty one to put it in. */
    private int slot(long id) {
      int mask = slots.length - 1;
      int i = (int) ((id * 0x9E3779B97F4A7C15L) >>> 40) & mask;
      while (slots[i] != null && keys[i] != id) {
        i = (i + 1) & mask;
      }
      return i;
    }

    private void grow() {
      long[] oldKeys = keys;
      Person[] old = slots;
      keys = new long[old.length * 2];
      slots = new Person[old.length * 2];
      for (int i = 0; i < old.length; i++) {
        if (old[i] != null) {
          int at = slot(oldKeys[i]);
          keys[at] = oldKeys[i];
          slots[at] = old[i];
        }
      }
    }

    private void flush() {
      for (Person p : persons) {
        p.emit(ready);
        p.clear();  // the emitted rows are the output's now
        spare.push(p);
      }
      if (!persons.isEmpty()) {
        java.util.Arrays.fill(slots, null);
      }
      persons.clear();
      texts.clear();
      bytes = 0;
    }
  }
}
