package org.hdpspark;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.unsafe.types.UTF8String;

/**
 * Mutable state of one group of {@link HdpUsers}: per user id (a {@code Long} for an integral
 * column, a copied {@code UTF8String} for a string column) the row count k, the exact sum of the encoded values, the count of rows with an
 * invalid ε and the least and largest valid ε (NaN: none yet); the rows with a null user id
 * (counted, never keyed); the group's text.
 */
final class UserState implements HdpAggregate.State {

  /** One user's statistics. */
  static final class User {
    long k;
    long s;
    long bad;
    double emin = Double.NaN;
    double emax = Double.NaN;

    void add(long k2, long s2, long bad2, double min2, double max2) {
      k = Math.addExact(k, k2);
      s = Math.addExact(s, s2);
      bad += bad2;
      emin = Double.isNaN(emin) ? min2 : Double.isNaN(min2) ? emin : Math.min(emin, min2);
      emax = Double.isNaN(emax) ? max2 : Double.isNaN(max2) ? emax : Math.max(emax, max2);
    }
  }

  final HashMap<Object, User> users = new HashMap<>();
  long nullRows;
  boolean grouped;
  String group;

  /** Adds a partial state's user: {@code id} must not be reused by the caller. */
  void add(Object id, long k, long s, long bad, double emin, double emax) {
    User u = users.get(id);
    if (u == null) {
      u = new User();
      users.put(id, u);
    }
    u.add(k, s, bad, emin, emax);
  }

  void merge(UserState b) {
    if (!grouped && b.grouped) {
      group = b.group;
      grouped = true;
    }
    nullRows += b.nullRows;
    for (Map.Entry<Object, User> e : b.users.entrySet()) {
      User u = e.getValue();
      add(e.getKey(), u.k, u.s, u.bad, u.emin, u.emax);
    }
  }

  /** A user id's text, as Spark's cast to string. */
  static UTF8String text(Object id) {
    return id instanceof UTF8String ? (UTF8String) id : UTF8String.fromString(id.toString());
  }

  /** The (text, user) pairs in ascending byte order of the text. */
  List<Map.Entry<UTF8String, User>> sorted() {
    List<Map.Entry<UTF8String, User>> out = new ArrayList<>(users.size());
    for (Map.Entry<Object, User> e : users.entrySet()) {
      out.add(new java.util.AbstractMap.SimpleImmutableEntry<>(text(e.getKey()), e.getValue()));
    }
    out.sort(Map.Entry.comparingByKey());
    return out;
  }

  /** The state as bytes (Spark spills and shuffles the partial aggregates). */
  @Override
  public byte[] toBytes() {
    byte[] g = group == null ? null : group.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    int size = 4 + 1 + 4 + (g == null ? 0 : g.length) + 8;
    for (Object id : users.keySet()) {
      size += 1 + (id instanceof UTF8String ? 4 + ((UTF8String) id).numBytes() : 8) + 40;
    }
    ByteBuffer buf = ByteBuffer.allocate(size);
    buf.putInt(users.size()).put((byte) (grouped ? 1 : 0));
    buf.putInt(g == null ? -1 : g.length);
    if (g != null) {
      buf.put(g);
    }
    buf.putLong(nullRows);
    for (Map.Entry<Object, User> e : users.entrySet()) {
      User u = e.getValue();
      if (e.getKey() instanceof UTF8String) {
        byte[] id = ((UTF8String) e.getKey()).getBytes();
        buf.put((byte) 1).putInt(id.length).put(id);
      } else {
        buf.put((byte) 0).putLong((Long) e.getKey());
      }
      buf.putLong(u.k).putLong(u.s).putLong(u.bad).putDouble(u.emin).putDouble(u.emax);
    }
    return buf.array();
  }

  /** The state {@link #toBytes} wrote. */
  static UserState fromBytes(byte[] bytes) {
    ByteBuffer buf = ByteBuffer.wrap(bytes);
    int n = buf.getInt();
    UserState s = new UserState();
    s.grouped = buf.get() == 1;
    int gl = buf.getInt();
    if (gl >= 0) {
      byte[] g = new byte[gl];
      buf.get(g);
      s.group = new String(g, java.nio.charset.StandardCharsets.UTF_8);
    }
    s.nullRows = buf.getLong();
    for (int i = 0; i < n; i++) {
      Object id;
      if (buf.get() == 1) {
        byte[] b = new byte[buf.getInt()];
        buf.get(b);
        id = UTF8String.fromBytes(b);
      } else {
        id = buf.getLong();
      }
      s.add(id, buf.getLong(), buf.getLong(), buf.getLong(), buf.getDouble(), buf.getDouble());
    }
    return s;
  }
}
