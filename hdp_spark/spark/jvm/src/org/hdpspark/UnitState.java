package org.hdpspark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.PriorityQueue;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Mutable state of one person of {@link HdpUnitBound}: at most {@code maxGroups} groups, the
 * ones with the smallest (group rank, group) seen so far, each with at most {@code maxRows}
 * rows, the ones with the smallest (row rank, codes) seen so far (a max-heap), each row's
 * payload an {@link UnsafeRow} copy.
 *
 * <p>Why dropping early is exact: a group dropped from a partial state has {@code maxGroups}
 * groups of the same person ranked before it in that partial state, all of which the person
 * has, so it is not among the person's {@code maxGroups} first groups; the same for a row
 * and {@code maxRows} rows of its (person, group). So the final state holds the rows the
 * window rule keeps, up to rows of equal (row rank, codes): those have equal codes (the rank
 * is a function of the person, the group and the codes), so any of them gives the release
 * the same statistics.
 */
final class UnitState {

  /** One kept row. */
  static final class Row {
    final long rank;
    final UTF8String codes;
    final UnsafeRow payload;

    Row(long rank, UTF8String codes, UnsafeRow payload) {
      this.rank = rank;
      this.codes = codes;
      this.payload = payload;
    }
  }

  /** Row order: row rank, then the codes' text (Spark's string order, byte order). */
  static int compare(long rank, UTF8String codes, Row b) {
    int c = Long.compare(rank, b.rank);
    return c != 0 ? c : codes.compareTo(b.codes);
  }

  static final Comparator<Row> ROWS = (a, b) -> compare(a.rank, a.codes, b);

  /** One kept group: its rank, its position, its rows (largest first). */
  static final class Group {
    final long rank;
    final long group;
    final PriorityQueue<Row> rows = new PriorityQueue<>(ROWS.reversed());

    Group(long rank, long group) {
      this.rank = rank;
      this.group = group;
    }
  }

  static int compare(long rank, long group, Group b) {
    int c = Long.compare(rank, b.rank);
    return c != 0 ? c : Long.compare(group, b.group);
  }

  static final Comparator<Group> GROUPS = (a, b) -> compare(a.rank, a.group, b);

  final int maxGroups;
  final int maxRows;
  final HashMap<Long, Group> byGroup = new HashMap<>();
  final TreeSet<Group> order = new TreeSet<>(GROUPS);

  UnitState(int maxGroups, int maxRows) {
    this.maxGroups = maxGroups;
    this.maxRows = maxRows;
  }

  /** The state's group {@code group} (rank {@code rank}), made room for; null: not kept. */
  Group group(long rank, long group) {
    Group g = byGroup.get(group);
    if (g != null) {
      return g;
    }
    if (order.size() >= maxGroups) {
      Group last = order.last();
      if (compare(rank, group, last) >= 0) {
        return null;
      }
      order.pollLast();
      byGroup.remove(last.group);
    }
    g = new Group(rank, group);
    byGroup.put(group, g);
    order.add(g);
    return g;
  }

  /** Whether a row (rank, codes) would be kept in {@code g} (before its payload is copied). */
  boolean admits(Group g, long rank, UTF8String codes) {
    return g.rows.size() < maxRows || compare(rank, codes, g.rows.peek()) < 0;
  }

  /** Adds a row {@link #admits} said is kept; {@code codes} and {@code payload} owned. */
  void add(Group g, Row r) {
    if (g.rows.size() >= maxRows) {
      g.rows.poll();
    }
    g.rows.add(r);
  }

  void merge(UnitState b) {
    for (Group src : b.order) {
      Group g = group(src.rank, src.group);
      if (g == null) {
        continue;
      }
      for (Row r : src.rows) {
        if (admits(g, r.rank, r.codes)) {
          add(g, r);
        }
      }
    }
  }

  /** The kept payloads, in (group rank, group, row rank, codes) order. */
  List<UnsafeRow> rows() {
    List<UnsafeRow> out = new ArrayList<>();
    for (Group g : order) {
      List<Row> rs = new ArrayList<>(g.rows);
      rs.sort(ROWS);
      for (Row r : rs) {
        out.add(r.payload);
      }
    }
    return out;
  }

  byte[] toBytes() {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      DataOutputStream out = new DataOutputStream(bytes);
      out.writeInt(maxGroups);
      out.writeInt(maxRows);
      out.writeInt(order.size());
      for (Group g : order) {
        out.writeLong(g.rank);
        out.writeLong(g.group);
        out.writeInt(g.rows.size());
        for (Row r : g.rows) {
          out.writeLong(r.rank);
          byte[] c = r.codes.getBytes();
          out.writeInt(c.length);
          out.write(c);
          out.writeInt(r.payload.numFields());
          byte[] p = r.payload.getBytes();
          out.writeInt(p.length);
          out.write(p);
        }
      }
      out.flush();
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static UnitState fromBytes(byte[] data) {
    try {
      DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
      UnitState s = new UnitState(in.readInt(), in.readInt());
      int groups = in.readInt();
      for (int i = 0; i < groups; i++) {
        Group g = s.group(in.readLong(), in.readLong());
        int rows = in.readInt();
        for (int j = 0; j < rows; j++) {
          long rank = in.readLong();
          byte[] c = new byte[in.readInt()];
          in.readFully(c);
          int fields = in.readInt();
          byte[] p = new byte[in.readInt()];
          in.readFully(p);
          UnsafeRow payload = new UnsafeRow(fields);
          payload.pointTo(p, p.length);
          s.add(g, new Row(rank, UTF8String.fromBytes(c), payload));
        }
      }
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
