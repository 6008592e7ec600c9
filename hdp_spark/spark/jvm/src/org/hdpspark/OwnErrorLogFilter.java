package org.hdpspark;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.filter.AbstractFilter;
import org.apache.spark.SparkThrowable;

/**
 * A log4j filter that drops Spark's duplicates of hdp_spark's own one-line errors: when an
 * ε check of the extension ({@link EpsCheck}: {@code USER_RAISED_EXCEPTION} thrown from
 * {@code org.hdpspark}) fails a task, the driver raises it to the caller as one line, but
 * Spark also logs it with two stack traces (the executor's {@code ERROR Executor: Exception
 * in task ...}, the scheduler's {@code WARN TaskSetManager: Lost task ...}) and a third line
 * ({@code ERROR TaskSetManager: Task 0 in stage 2.0 failed 1 times; aborting job}). Those
 * three, and only for such an error, are denied; every other event (Spark's own errors, a
 * user's {@code raise_error}, a Python UDF's failure) is left alone.
 *
 * <p>Installed once per JVM on the loggers' configurations by the extension
 * ({@code spark.sql.extensions}, what {@code hdp_spark.spark.configure} sets, or
 * {@link HdpExtensions#register}); on a cluster the executors' own logs keep their copy.
 */
final class OwnErrorLogFilter extends AbstractFilter {

  static final String EXECUTOR = "org.apache.spark.executor.Executor";
  static final String TASK_SET = "org.apache.spark.scheduler.TaskSetManager";
  private static final Pattern LOST = Pattern.compile(
      "^Lost task \\S+ in stage (\\S+) .*\\[" + EpsCheck.CONDITION + "\\]", Pattern.DOTALL);
  private static final Pattern ABORT = Pattern.compile(
      "^Task \\S+ in stage (\\S+) failed \\d+ times; aborting job");
  /** The first frame of the exception's text when our code threw it. */
  private static final String OUR_FRAME = "\tat org.hdpspark.";
  private static volatile boolean installed;

  /** Stages whose failure was ours (the last few: a filter must not grow without bound). */
  private final Set<String> ourStages = Collections.newSetFromMap(
      Collections.synchronizedMap(new LinkedHashMap<String, Boolean>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
          return size() > 64;
        }
      }));

  private OwnErrorLogFilter() {
    super(Result.DENY, Result.NEUTRAL);
  }

  /** Whether {@code t} (or a cause) is an {@code USER_RAISED_EXCEPTION} thrown by our code. */
  static boolean ours(Throwable t) {
    for (Throwable e = t; e != null; e = e.getCause()) {
      if (e instanceof SparkThrowable
          && EpsCheck.CONDITION.equals(((SparkThrowable) e).getCondition())) {
        StackTraceElement[] frames = e.getStackTrace();
        return frames.length > 0 && frames[0].getClassName().startsWith("org.hdpspark.");
      }
      if (e.getCause() == e) {
        break;
      }
    }
    return false;
  }

  @Override
  public Result filter(LogEvent event) {
    String logger = event.getLoggerName();
    if (EXECUTOR.equals(logger)) {
      return event.getLevel() == Level.ERROR && ours(event.getThrown()) ? onMatch : onMismatch;
    }
    if (!TASK_SET.equals(logger) || event.getMessage() == null) {
      return onMismatch;
    }
    String text = event.getMessage().getFormattedMessage();
    if (event.getLevel() == Level.WARN) {
      Matcher m = LOST.matcher(text);
      if (m.find() && text.startsWith(OUR_FRAME, text.indexOf("\tat ", m.end()))) {
        ourStages.add(m.group(1));
        return onMatch;
      }
    } else if (event.getLevel() == Level.ERROR) {
      Matcher m = ABORT.matcher(text);
      if (m.find() && ourStages.contains(m.group(1))) {
        return onMatch;
      }
    }
    return onMismatch;
  }

  /** Adds the filter to the configurations of the executor's and the scheduler's loggers
   * (idempotent; a JVM whose logging is not log4j 2 core is left as it is). */
  static synchronized void install() {
    if (installed) {
      return;
    }
    installed = true;
    Object context = LogManager.getContext(false);
    if (!(context instanceof LoggerContext)) {
      return;
    }
    LoggerContext ctx = (LoggerContext) context;
    Configuration cfg = ctx.getConfiguration();
    OwnErrorLogFilter filter = new OwnErrorLogFilter();
    filter.start();
    Set<LoggerConfig> done = Collections.newSetFromMap(new IdentityHashMap<>());
    for (String name : new String[] {EXECUTOR, TASK_SET}) {
      LoggerConfig lc = cfg.getLoggerConfig(name);
      if (done.add(lc)) {
        lc.addFilter(filter);
      }
    }
    ctx.updateLoggers();
  }
}
