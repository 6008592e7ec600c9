package org.hdpspark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.PriorityQueue;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import org.hdpspark.UnitBound.Spec;

/**
 * The state of {@link UnitBound}'s operator over one partition: the stream of a partition
 * sorted by the id ({@link Stream}, one {@link Person} at a time), the hashed alternative
 * ({@link #hashed}), and the ranks ({@link Ranks}). The rule, and why this keeps it: the
 * comment of {@link UnitBound}.
 */
final class UnitStream {

  private UnitStream() {}

  private static final String SEP = "\u001f";

  /** Copies of a task's rows (Spark reuses a row's buffer for the next one) as UnsafeRows,
   * whatever row class the child gives. */
  static final class Copier {
    private final StructType schema;
    private UnsafeProjection projection;  // made once, for a child that gives other rows

    Copier(StructType schema) {
      this.schema = schema;
    }

    UnsafeRow copy(InternalRow row) {
      if (row instanceof UnsafeRow) {
        return ((UnsafeRow) row).copy();
      }
      if (projection == null) {
        projection = UnsafeProjection.create(schema);
      }
      return projection.apply(row).copy();
    }
  }

  /** A person's id as the operators read it (an integral id as a long, a string id's
   * bytes), its order against a row's id and its length-tagged text. */
  static final class Id {
    private final int at;
    private final char kind;
    private long number;
    private UTF8String text;
    private byte[] tagged;

    Id(int at, char kind) {
      this.at = at;
      this.kind = kind;
    }

    /** The id of {@code row}. */
    void set(InternalRow row) {
      if (kind == 'S') {
        text = row.getUTF8String(at).clone();
      } else {
        number = integral(row, at, kind);
      }
      tagged = null;
    }

    /** The order of {@code row}'s id against this one (Spark's: numbers, bytes). */
    int compare(InternalRow row) {
      if (kind == 'S') {
        return text.binaryCompare(row.getUTF8String(at));
      }
      return Long.compare(number, integral(row, at, kind));
    }

    /** The id's text, length-prefixed: {@code <code points>:<text>}, as UTF-8 (the text
     * every rank of the person reads, as the native path's and pandas'). */
    byte[] tagged() {
      if (tagged == null) {
        byte[] bytes;
        int length;
        if (kind == 'S') {
          bytes = text.getBytes();
          length = text.numChars();
        } else {
          String decimal = Long.toString(number);
          bytes = decimal.getBytes(StandardCharsets.UTF_8);
          length = decimal.length();
        }
        byte[] prefix = (length + ":").getBytes(StandardCharsets.UTF_8);
        tagged = new byte[prefix.length + bytes.length];
        System.arraycopy(prefix, 0, tagged, 0, prefix.length);
        System.arraycopy(bytes, 0, tagged, prefix.length, bytes.length);
      }
      return tagged;
    }
  }

  static Iterator<InternalRow> hashed(Spec spec, Ranks ranks, Iterator<InternalRow> in) {
    Map<Object, Person> persons = new HashMap<>();
    while (in.hasNext()) {
      InternalRow row = in.next();
      Object id = spec.idKind == 'S' ? row.getUTF8String(spec.idAt).clone()
          : (Object) integral(row, spec.idAt, spec.idKind);
      Person p = persons.get(id);
      if (p == null) {
        p = new Person(spec, ranks);
        p.reset(row);
        persons.put(id, p);
      }
      p.add(row);
    }
    List<InternalRow> out = new ArrayList<>();
    for (Person p : persons.values()) {
      p.emit(out);
    }
    return out.iterator();
  }

  /** An integral field of kind {@code k} (its schema type's getter) as a long. */
  static long integral(InternalRow row, int at, char k) {
    switch (k) {
      case 'l':
        return row.getLong(at);
      case 'i':
        return row.getInt(at);
      case 's':
        return row.getShort(at);
      case 'b':
        return row.getByte(at);
      default:
        throw new IllegalStateException("hdp_spark: not an integral column");
    }
  }

  /** One person's state while their rows stream in: the bounding rule's {@link Person},
   * the local-DP one-report rule's {@link LdpUnitBound.Reports}. */
  interface State {
    /** Starts the person of {@code row} (lets go of the previous one's state). */
    void reset(InternalRow row);

    /** The order of {@code row}'s id against the person's (Spark's: numbers, bytes). */
    int compareId(InternalRow row);

    /** Reads one of the person's rows. */
    void add(InternalRow row);

    /** Appends the person's kept rows. */
    void emit(List<InternalRow> out);
  }

  /** The kept rows of a sorted partition, one person at a time. */
  static final class Stream implements Iterator<InternalRow> {
    private final Iterator<InternalRow> input;
    private final State person;
    private final List<InternalRow> ready = new ArrayList<>();
    private int next;
    private boolean open;

    Stream(State person, Iterator<InternalRow> input) {
      this.input = input;
      this.person = person;
    }

    @Override
    public boolean hasNext() {
      while (next >= ready.size()) {
        ready.clear();
        next = 0;
        if (!fill()) {
          return false;
        }
      }
      return true;
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      return ready.get(next++);
    }

    /** Reads rows until one person is complete and emitted into {@code ready}; false when
     * the partition is exhausted and nothing is left to emit. */
    private boolean fill() {
      while (input.hasNext()) {
        InternalRow row = input.next();
        if (open) {
          int c = person.compareId(row);
          if (c != 0) {
            if (c > 0) {  // a smaller id after a larger one: the input is not sorted
              throw new IllegalStateException("hdp_spark: the bounding operator's input "
                  + "is not sorted by the privacy unit's id; refusing to bound it");
            }
            person.emit(ready);
            person.reset(row);
            person.add(row);
            return true;
          }
        } else {
          person.reset(row);
          open = true;
        }
        person.add(row);
      }
      if (open) {
        person.emit(ready);
        open = false;
        return true;
      }
      return false;
    }
  }

  /** The SHA-256 ranks of one task (a digest is not thread-safe: one per partition). */
  static final class Ranks {
    private final MessageDigest sha;
    private final byte[] groupPrefix;
    private final byte[] rowPrefix;
    private static final byte[] SEP_BYTES = SEP.getBytes(StandardCharsets.UTF_8);

    Ranks(String key) {
      try {
        sha = MessageDigest.getInstance("SHA-256");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
      groupPrefix = (key + SEP + "g" + SEP).getBytes(StandardCharsets.UTF_8);
      rowPrefix = (key + SEP + "r" + SEP).getBytes(StandardCharsets.UTF_8);
    }

    /** rank(group_rank_text(key, person, group)). */
    long group(byte[] person, byte[] group) {
      sha.update(groupPrefix);
      sha.update(person);
      sha.update(SEP_BYTES);
      sha.update(group);
      return top60(sha.digest());
    }

    /** rank(row_rank_text(key, person, group, codes)). */
    long row(byte[] person, byte[] group, byte[] codes) {
      sha.update(rowPrefix);
      sha.update(person);
      sha.update(SEP_BYTES);
      sha.update(group);
      sha.update(SEP_BYTES);
      sha.update(codes);
      return top60(sha.digest());
    }

    private static long top60(byte[] d) {
      long v = 0;
      for (int i = 0; i < 8; i++) {
        v = (v << 8) | (d[i] & 0xffL);
      }
      return v >>> 4;
    }
  }

  /** A kept row (a copy) and, once its group holds more than maxRows rows, its rank and
   * codes text. */
  static final class Kept {
    final UnsafeRow row;
    long rank;
    UTF8String codes;

    Kept(UnsafeRow row) {
      this.row = row;
    }
  }

  /** Larger (rank, codes) first: the head of a group's heap is its worst kept row. */
  static final Comparator<Kept> WORST_FIRST = (a, b) -> {
    int c = Long.compare(b.rank, a.rank);
    return c != 0 ? c : b.codes.binaryCompare(a.codes);
  };

  /** One (person, group): its kept rows, and its rank once the person has too many. */
  static final class Cell {
    final Object group;  // a Long position or a UTF8String key text
    long rank;
    byte[] text;
    final List<Kept> rows = new ArrayList<>(2);
    PriorityQueue<Kept> heap;

    Cell(Object group) {
      this.group = group;
    }

    byte[] text() {
      if (text == null) {
        text = group instanceof UTF8String ? ((UTF8String) group).getBytes()
            : Long.toString((Long) group).getBytes(StandardCharsets.UTF_8);
      }
      return text;
    }
  }

  /** Groups in the rule's order: (group rank, group); positions numerically, texts as Spark
   * orders strings (bytes). */
  static int compareGroups(Cell a, Cell b) {
    int c = Long.compare(a.rank, b.rank);
    if (c != 0) {
      return c;
    }
    if (a.group instanceof Long) {
      return Long.compare((Long) a.group, (Long) b.group);
    }
    return ((UTF8String) a.group).binaryCompare((UTF8String) b.group);
  }

  private static final int DROPPED_CACHE = 4096;
  private static final int SMALL = 8;
  private static final Long GLOBAL = 0L;

  /** The state of one person while their rows stream in. */
  static final class Person implements State {
    private final Spec spec;
    private final Ranks ranks;
    private final Id id;
    private double eps;
    private final List<Cell> cells = new ArrayList<>();  // in the order they came
    private Map<Object, Cell> index;  // once the person has more than SMALL cells
    private TreeSet<Cell> order;  // once the person has more than maxGroups groups
    private final Map<Object, Long> dropped = new HashMap<>();
    private final Copier copier;
    private final boolean carry;  // the pre-bound's: keep an out-of-key carrier of ε
    private UnsafeRow carrier;  // a copy of the person's first out-of-key row, while no cell
    private long held;  // the bytes of the copies made since reset (an upper bound)

    Person(Spec spec, Ranks ranks) {
      this(spec, ranks, false);
    }

    /** {@code carry}: the person's rows are one chunk of theirs ({@link UnitPreBound}); a
     * chunk with no row inside the keys emits one of its rows outside them, carrying ε. */
    Person(Spec spec, Ranks ranks, boolean carry) {
      this.spec = spec;
      this.ranks = ranks;
      this.carry = carry;
      this.id = new Id(spec.idAt, spec.idKind);
      this.copier = new Copier(spec.schema);
    }

    /** An upper bound of the bytes the person holds (copies, cells, dropped ranks). */
    long held() {
      return held + 64L * cells.size() + 64L * dropped.size() + 160L;
    }

    /** Starts the person of {@code row}. */
    @Override
    public void reset(InternalRow row) {
      id.set(row);
      clear();
    }

    /** Lets go of everything held (the id aside). */
    void clear() {
      eps = Double.POSITIVE_INFINITY;
      cells.clear();
      index = null;
      order = null;
      dropped.clear();
      carrier = null;
      held = 0;
    }

    @Override
    public int compareId(InternalRow row) {
      return id.compare(row);
    }

    private byte[] tagged() {
      return id.tagged();
    }

    @Override
    public void add(InternalRow row) {
      double level = row.isNullAt(spec.epsAt) ? 0.0 : row.getDouble(spec.epsAt);
      if (Double.isNaN(level) || level < 0.0) {
        level = 0.0;
      }
      if (level < eps) {
        eps = level;
      }
      Object group;
      if (spec.groupKind == 'n') {
        group = GLOBAL;
      } else if (row.isNullAt(spec.groupAt)) {
        outside(row);  // outside the keys: counts for ε only
        return;
      } else if (spec.groupKind == 'S') {
        group = row.getUTF8String(spec.groupAt);
      } else {
        long at = integral(row, spec.groupAt, spec.groupKind);
        if (at < 0) {
          outside(row);  // outside the keys: counts for ε only
          return;
        }
        group = at;
      }
      Cell cell = find(group);
      if (cell == null) {
        cell = admit(group instanceof UTF8String ? ((UTF8String) group).clone() : group);
        if (cell == null) {
          return;  // a group the person does not keep
        }
      }
      keep(cell, row);
    }

    /** A row outside the keys: in a chunk (carry), the first is kept while the person has
     * no cell, to carry the chunk's ε if no row of theirs inside the keys comes. */
    private void outside(InternalRow row) {
      if (carry && carrier == null && cells.isEmpty()) {
        carrier = copy(row);
      }
    }

    /** The person's cell of {@code group}, or null (a scan while they are few). */
    private Cell find(Object group) {
      if (index != null) {
        return index.get(group);
      }
      for (Cell c : cells) {
        if (c.group.equals(group)) {
          return c;
        }
      }
      return null;
    }

    private void put(Cell cell) {
      cells.add(cell);
      if (index != null) {
        index.put(cell.group, cell);
      } else if (cells.size() > SMALL) {
        index = new HashMap<>();
        for (Cell c : cells) {
          index.put(c.group, c);
        }
      }
    }

    /** A new group's cell, or null when the person keeps other groups before it. */
    private Cell admit(Object group) {
      if (order == null && cells.size() < spec.maxGroups) {
        Cell cell = new Cell(group);
        put(cell);
        return cell;
      }
      if (order == null) {  // the person's (maxGroups + 1)-th group: ranks decide from now
        order = new TreeSet<>(UnitStream::compareGroups);
        for (Cell c : cells) {
          c.rank = ranks.group(tagged(), c.text());
          order.add(c);
        }
      }
      Long known = dropped.get(group);
      Cell cell = new Cell(group);
      cell.rank = known != null ? known : ranks.group(tagged(), cell.text());
      if (known != null || compareGroups(cell, order.last()) > 0) {
        remember(cell);
        return null;
      }
      Cell worst = order.pollLast();
      cells.remove(worst);  // by identity
      if (index != null) {
        index.remove(worst.group);
      }
      remember(worst);
      order.add(cell);
      put(cell);
      return cell;
    }

    private void remember(Cell cell) {
      // a dropped group never comes back (the kept groups only get better): its rank
      // spares the next of its rows a hash
      if (dropped.size() < DROPPED_CACHE) {
        dropped.put(cell.group, cell.rank);
      }
    }

    private UnsafeRow copy(InternalRow row) {
      UnsafeRow c = copier.copy(row);
      held += c.getSizeInBytes() + 48L;
      return c;
    }

    private void keep(Cell cell, InternalRow row) {
      if (cell.heap == null && cell.rows.size() < spec.maxRows) {
        cell.rows.add(new Kept(copy(row)));
        return;
      }
      Kept k = new Kept(null);
      rank(cell, k, row);
      if (cell.heap == null) {  // the group's (maxRows + 1)-th row: ranks decide from now
        cell.heap = new PriorityQueue<>(spec.maxRows + 1, WORST_FIRST);
        for (Kept old : cell.rows) {
          rank(cell, old, old.row);
          cell.heap.add(old);
        }
        cell.rows.clear();
      }
      if (WORST_FIRST.compare(k, cell.heap.peek()) <= 0) {
        return;  // not better than the worst kept row: dropped without a copy
      }
      Kept kept = new Kept(copy(row));
      kept.rank = k.rank;
      kept.codes = k.codes;
      cell.heap.add(kept);
      cell.heap.poll();
    }

    private void rank(Cell cell, Kept k, InternalRow row) {
      k.codes = codes(row);
      k.rank = ranks.row(tagged(), cell.text(), k.codes.getBytes());
    }

    /** The codes' text: each non-null code in decimal, joined by ','. */
    private UTF8String codes(InternalRow row) {
      StringBuilder b = new StringBuilder();
      boolean first = true;
      for (int i = 0; i < spec.codeAt.length; i++) {
        int at = spec.codeAt[i];
        if (row.isNullAt(at)) {
          continue;  // as concat_ws skips a null
        }
        if (!first) {
          b.append(',');
        }
        b.append(integral(row, at, spec.codeKind[i]));
        first = false;
      }
      return UTF8String.fromString(b.toString());
    }

    /** Appends the kept rows, ε replaced by the person's (in a chunk: the chunk's, and
     * its carrier row when it has no row inside the keys). */
    @Override
    public void emit(List<InternalRow> out) {
      if (carrier != null && cells.isEmpty()) {
        carrier.setDouble(spec.epsAt, eps);
        out.add(carrier);
      }
      for (Cell cell : cells) {
        Iterable<Kept> kept = cell.heap != null ? cell.heap : cell.rows;
        for (Kept k : kept) {
          k.row.setDouble(spec.epsAt, eps);
          out.add(k.row);
        }
      }
    }
  }
}
