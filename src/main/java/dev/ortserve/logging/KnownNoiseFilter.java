package dev.ortserve.logging;

import io.quarkus.logging.LoggingFilter;
import org.jboss.logmanager.ExtLogRecord;

import java.util.logging.Filter;
import java.util.logging.LogRecord;

/**
 * Drops the startup warnings that are known to be harmless and that nobody running ortserve can
 * act on, so that a default start shows only lines that matter; and shortens a startup failure
 * caused by the model to the one line that says why. Each rule names one logger and
 * one message; everything else passes. (The @Valid-on-container warnings and DJL's maxLength
 * notice are fixed at their causes, in the generator templates and the tokenizer options.)
 */
@LoggingFilter(name = "ortserve-known-noise")
public final class KnownNoiseFilter implements Filter {

    @Override
    public boolean isLoggable(LogRecord record) {
        String logger = record.getLoggerName();
        if (logger == null) return true;
        String message = record instanceof ExtLogRecord ext ? ext.getFormattedMessage() : record.getMessage();
        if (message == null) return true;
        // Vert.x registers the Redis client's pool gauges twice (the same upstream bug as quarkusio/quarkus#47504 for SQL pools);
        // the first registration is the one exported.
        if (logger.equals("io.micrometer.core.instrument.MeterRegistry") && message.contains("has been already registered")
                && message.contains("name='redis.pool.")) {
            return false;
        }
        // The union wrappers (dev.ortserve.wire.union.OneOf) cascade validation into a member whose type is only known
        // at runtime (a generated DTO, never a container): Hibernate Validator warns that an Object "could be" a container.
        if (logger.equals("org.hibernate.validator.internal.metadata.aggregated.CascadingMetaDataBuilder")
                && message.startsWith("HV000272") && message.endsWith("Affected element: value")) {
            return false;
        }
        // A model that cannot be served (a missing file, a Hub error with its cause) stops startup: one line saying why,
        // instead of Quarkus's stack trace through its bootstrap. Every other startup failure keeps its stack trace.
        if (logger.equals("io.quarkus.runtime.Application") && message.startsWith("Failed to start application")
                && record instanceof ExtLogRecord ext) {
            for (Throwable t = record.getThrown(); t != null; t = t.getCause()) {
                if (t.getClass().getName().equals("dev.ortserve.engine.ModelLoadException")) {
                    ext.setMessage("ortserve cannot start: " + t.getMessage(), ExtLogRecord.FormatStyle.NO_FORMAT);
                    ext.setParameters(null);
                    ext.setThrown(null);
                    break;
                }
            }
        }
        return true;
    }
}
