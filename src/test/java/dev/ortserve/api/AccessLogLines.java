package dev.ortserve.api;

import org.jboss.logmanager.ExtLogRecord;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.junit.jupiter.api.Assertions.fail;

/** Captures the access log's lines (category dev.ortserve.access) in the test's JVM, where the app logs. */
final class AccessLogLines extends Handler implements AutoCloseable {

    /** One line: its message, and the request id the log record's MDC carried. */
    record Line(String message, String mdcRequestId) {
    }

    private final List<Line> lines = new CopyOnWriteArrayList<>();
    private final Logger logger = Logger.getLogger("dev.ortserve.access");

    AccessLogLines() {
        logger.addHandler(this);
    }

    @Override
    public void publish(LogRecord record) {
        String message = record instanceof ExtLogRecord ext ? ext.getFormattedMessage() : record.getMessage();
        String mdc = record instanceof ExtLogRecord ext ? ext.getMdc("requestId") : null;
        lines.add(new Line(message, mdc));
    }

    /**
     * The line that matches, waiting for it: a line is written when the answer has ended, which the client may see
     * a moment before the server's end handler runs.
     */
    Line await(Predicate<String> matching) throws InterruptedException {
        for (int i = 0; i < 1_000; i++) {
            for (Line l : lines) if (matching.test(l.message())) return l;
            Thread.sleep(10);
        }
        fail("no access log line matched; lines: " + lines);
        return null;
    }

    List<Line> lines() {
        return lines;
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        logger.removeHandler(this);
    }
}
