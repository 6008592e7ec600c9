package org.hdpspark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Mutable state of one group: cells in insertion order plus an open-addressing index. */
final class CellState implements HdpAggregate.State {
  final int k;
  int size;
  double[] level = new double[8];
  int[] code = new int[8];
  long[] acc; // per cell: count, then k sums
  int[] slots = new int[16];
  boolean grouped;
  String group;
  int last = -1;

  CellState(int k) {
    this.k = k;
    this.acc = new long[8 * (k + 1)];
    Arrays.fill(slots, -1);
  }

  private static int hash(long bits, int code) {
    long h = bits * 0x9E3779B97F4A7C15L + code * 0xC2B2AE3D27D4EB4FL;
    return (int) (h ^ (h >>> 29));
  }

  int cell(double lv, int cd) {
    long bits = Double.doubleToLongBits(lv);
    if (last >= 0 && Double.doubleToLongBits(level[last]) == bits && code[last] == cd) {
      return last;
    }
    int mask = slots.length - 1;
    int i = hash(bits, cd) & mask;
    while (true) {
      int at = slots[i];
      if (at < 0) {
        break;
      }
      if (Double.doubleToLongBits(level[at]) == bits && code[at] == cd) {
        last = at;
        return at;
      }
      i = (i + 1) & mask;
    }
    if (size == level.length) {
      level = Arrays.copyOf(level, size * 2);
      code = Arrays.copyOf(code, size * 2);
      acc = Arrays.copyOf(acc, size * 2 * (k + 1));
    }
    level[size] = lv;
    code[size] = cd;
    slots[i] = size;
    last = size;
    size++;
    if (size * 2 > slots.length) {
      rehash();
    }
    return last;
  }

  private void rehash() {
    slots = new int[slots.length * 2];
    Arrays.fill(slots, -1);
    int mask = slots.length - 1;
    for (int c = 0; c < size; c++) {
      int i = hash(Double.doubleToLongBits(level[c]), code[c]) & mask;
      while (slots[i] >= 0) {
        i = (i + 1) & mask;
      }
      slots[i] = c;
    }
  }

  /** The state as bytes (Spark spills and shuffles the partial aggregates). */
  @Override
  public byte[] toBytes() {
    CellState s = this;
    byte[] g = s.group == null ? null : s.group.getBytes(StandardCharsets.UTF_8);
    int w = s.k + 1;
    ByteBuffer buf = ByteBuffer.allocate(16 + (g == null ? 0 : g.length) + s.size * (12 + 8 * w));
    buf.putInt(s.k).putInt(s.size).put((byte) (s.grouped ? 1 : 0));
    buf.putInt(g == null ? -1 : g.length);
    if (g != null) {
      buf.put(g);
    }
    for (int c = 0; c < s.size; c++) {
      buf.putDouble(s.level[c]).putInt(s.code[c]);
      for (int j = 0; j < w; j++) {
        buf.putLong(s.acc[c * w + j]);
      }
    }
    return Arrays.copyOf(buf.array(), buf.position());
  }

  /** The state {@link #toBytes} wrote. */
  static CellState fromBytes(byte[] bytes) {
    ByteBuffer buf = ByteBuffer.wrap(bytes);
    int k = buf.getInt();
    int size = buf.getInt();
    CellState s = new CellState(k);
    s.grouped = buf.get() == 1;
    int gl = buf.getInt();
    if (gl >= 0) {
      byte[] g = new byte[gl];
      buf.get(g);
      s.group = new String(g, StandardCharsets.UTF_8);
    }
    int w = k + 1;
    for (int c = 0; c < size; c++) {
      double lv = buf.getDouble();
      int cd = buf.getInt();
      int at = s.cell(lv, cd);
      for (int j = 0; j < w; j++) {
        s.acc[at * w + j] += buf.getLong();
      }
    }
    return s;
  }
}
