package org.hdpspark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Mutable state of one group of {@link HdpRecords}: the count of each distinct whole-record
 * key (an open-addressing map from a non-negative long key to its count, at most half full),
 * and the group's text.
 */
final class RecordState implements HdpAggregate.State {
  private static final long EMPTY = -1L;

  long[] keys = new long[16];
  long[] counts = new long[16];
  int size;
  boolean grouped;
  String group;

  RecordState() {
    Arrays.fill(keys, EMPTY);
  }

  private static int hash(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }

  void add(long key, long n) {
    int mask = keys.length - 1;
    int i = hash(key) & mask;
    while (keys[i] != EMPTY) {
      if (keys[i] == key) {
        counts[i] += n;
        return;
      }
      i = (i + 1) & mask;
    }
    keys[i] = key;
    counts[i] = n;
    size++;
    if (size * 2 > keys.length) {
      grow();
    }
  }

  private void grow() {
    long[] oldKeys = keys;
    long[] oldCounts = counts;
    keys = new long[oldKeys.length * 2];
    counts = new long[oldKeys.length * 2];
    Arrays.fill(keys, EMPTY);
    size = 0;
    for (int i = 0; i < oldKeys.length; i++) {
      if (oldKeys[i] != EMPTY) {
        add(oldKeys[i], oldCounts[i]);
      }
    }
  }

  /** The (key, count) pairs sorted by key: two arrays of {@code size}. */
  long[][] sorted() {
    long[] k = new long[size];
    int at = 0;
    for (long key : keys) {
      if (key != EMPTY) {
        k[at++] = key;
      }
    }
    Arrays.sort(k);
    long[] n = new long[size];
    for (int i = 0; i < size; i++) {
      n[i] = count(k[i]);
    }
    return new long[][] {k, n};
  }

  private long count(long key) {
    int mask = keys.length - 1;
    int i = hash(key) & mask;
    while (keys[i] != key) {
      i = (i + 1) & mask;
    }
    return counts[i];
  }

  void merge(RecordState b) {
    if (!grouped && b.grouped) {
      group = b.group;
      grouped = true;
    }
    for (int i = 0; i < b.keys.length; i++) {
      if (b.keys[i] != EMPTY) {
        add(b.keys[i], b.counts[i]);
      }
    }
  }

  /** The state as bytes (Spark spills and shuffles the partial aggregates). */
  @Override
  public byte[] toBytes() {
    byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
    ByteBuffer buf = ByteBuffer.allocate(9 + (g == null ? 0 : g.length) + size * 16);
    buf.putInt(size).put((byte) (grouped ? 1 : 0));
    buf.putInt(g == null ? -1 : g.length);
    if (g != null) {
      buf.put(g);
    }
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != EMPTY) {
        buf.putLong(keys[i]).putLong(counts[i]);
      }
    }
    return buf.array();
  }

  /** The state {@link #toBytes} wrote. */
  static RecordState fromBytes(byte[] bytes) {
    ByteBuffer buf = ByteBuffer.wrap(bytes);
    int size = buf.getInt();
    RecordState s = new RecordState();
    s.grouped = buf.get() == 1;
    int gl = buf.getInt();
    if (gl >= 0) {
      byte[] g = new byte[gl];
      buf.get(g);
      s.group = new String(g, StandardCharsets.UTF_8);
    }
    for (int i = 0; i < size; i++) {
      long key = buf.getLong();
      s.add(key, buf.getLong());
    }
    return s;
  }
}
