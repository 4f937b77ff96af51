package dev.ortserve.logging;

import io.quarkus.logging.LoggingFilter;
import org.jboss.logmanager.ExtLogRecord;

import java.util.logging.Filter;
import java.util.logging.LogRecord;

/**
 * Drops the startup warnings that are known to be harmless and that nobody running ortserve can
 * act on, so that a default start shows only lines that matter. Each rule names one logger and
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
        // The union wrappers (dev.ortserve.api.union.OneOf) cascade validation into a member whose type is only known
        // at runtime (a generated DTO, never a container): Hibernate Validator warns that an Object "could be" a container.
        if (logger.equals("org.hibernate.validator.internal.metadata.aggregated.CascadingMetaDataBuilder")
                && message.startsWith("HV000272") && message.endsWith("Affected element: value")) {
            return false;
        }
        return true;
    }
}
