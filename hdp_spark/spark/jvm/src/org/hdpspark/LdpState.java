package org.hdpspark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Mutable state of one group of {@link HdpLdpCells}: per (epsilon level, index) cell the row
 * count and the exact sums of the two limbs of the reports' fixed-point integers (an
 * open-addressing map keyed by the level's bits and the index, at most half full), and the
 * group's text. Sums are exact 64-bit integer sums ({@code Math.addExact}: an overflow fails
 * the query, as Spark's ANSI {@code sum} does), independent of the order of rows.
 */
final class LdpState implements HdpAggregate.State {
  long[] levels = new long[16];
  long[] index = new long[16];
  long[] count = new long[16];  // 0: empty slot (a present cell has at least one row)
  long[] hi = new long[16];
  long[] lo = new long[16];
  int size;
  boolean grouped;
  String group;

  private static int hash(long level, long idx) {
    long h = (level * 0x9E3779B97F4A7C15L) ^ (idx * 0xC2B2AE3D27D4EB4FL);
    return (int) (h ^ (h >>> 32));
  }

  void add(long level, long idx, long n, long h, long l) {
    int mask = count.length - 1;
    int i = hash(level, idx) & mask;
    while (count[i] != 0) {
      if (levels[i] == level && index[i] == idx) {
        count[i] = Math.addExact(count[i], n);
        hi[i] = Math.addExact(hi[i], h);
        lo[i] = Math.addExact(lo[i], l);
        return;
      }
      i = (i + 1) & mask;
    }
    levels[i] = level;
    index[i] = idx;
    count[i] = n;
    hi[i] = h;
    lo[i] = l;
    size++;
    if (size * 2 > count.length) {
      grow();
    }
  }

  private void grow() {
    long[] ol = levels;
    long[] oi = index;
    long[] on = count;
    long[] oh = hi;
    long[] olo = lo;
    int cap = ol.length * 2;
    levels = new long[cap];
    index = new long[cap];
    count = new long[cap];
    hi = new long[cap];
    lo = new long[cap];
    size = 0;
    for (int i = 0; i < ol.length; i++) {
      if (on[i] != 0) {
        add(ol[i], oi[i], on[i], oh[i], olo[i]);
      }
    }
  }

  /** The slots of the present cells sorted by (level as a double, index). */
  Integer[] sorted() {
    Integer[] at = new Integer[size];
    int k = 0;
    for (int i = 0; i < count.length; i++) {
      if (count[i] != 0) {
        at[k++] = i;
      }
    }
    Arrays.sort(at, (a, b) -> {
      int c = Double.compare(Double.longBitsToDouble(levels[a]),
          Double.longBitsToDouble(levels[b]));
      return c != 0 ? c : Long.compare(index[a], index[b]);
    });
    return at;
  }

  void merge(LdpState b) {
    if (!grouped && b.grouped) {
      group = b.group;
      grouped = true;
    }
    for (int i = 0; i < b.count.length; i++) {
      if (b.count[i] != 0) {
        add(b.levels[i], b.index[i], b.count[i], b.hi[i], b.lo[i]);
      }
    }
  }

  /** The state as bytes (Spark spills and shuffles the partial aggregates). */
  @Override
  public byte[] toBytes() {
    byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
    ByteBuffer buf = ByteBuffer.allocate(9 + (g == null ? 0 : g.length) + size * 40);
    buf.putInt(size).put((byte) (grouped ? 1 : 0));
    buf.putInt(g == null ? -1 : g.length);
    if (g != null) {
      buf.put(g);
    }
    for (int i = 0; i < count.length; i++) {
      if (count[i] != 0) {
        buf.putLong(levels[i]).putLong(index[i]).putLong(count[i]).putLong(hi[i])
            .putLong(lo[i]);
      }
    }
    return buf.array();
  }

  /** The state {@link #toBytes} wrote. */
  static LdpState fromBytes(byte[] bytes) {
    ByteBuffer buf = ByteBuffer.wrap(bytes);
    int size = buf.getInt();
    LdpState s = new LdpState();
    s.grouped = buf.get() == 1;
    int gl = buf.getInt();
    if (gl >= 0) {
      byte[] g = new byte[gl];
      buf.get(g);
      s.group = new String(g, StandardCharsets.UTF_8);
    }
    for (int i = 0; i < size; i++) {
      s.add(buf.getLong(), buf.getLong(), buf.getLong(), buf.getLong(), buf.getLong());
    }
    return s;
  }
}
