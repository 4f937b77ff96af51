package dev.ortserve.service;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * How long an unpinned model stays loaded after its last request, with Ollama's {@code keep_alive} semantics:
 * a duration ({@code 5m}, {@code 300s}, {@code 1h30m}, or a number of seconds), {@code -1} (or any negative) = forever,
 * {@code 0} = unload as soon as no request runs on it.
 */
public record KeepAlive(Duration duration) {

    public static final KeepAlive FOREVER = new KeepAlive(null);

    private static final Pattern PART = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h)");

    public boolean forever() {
        return duration == null;
    }

    /** @throws IllegalArgumentException saying what a keep_alive may be (the caller names the setting or field) */
    public static KeepAlive parse(String text) {
        String s = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
        if (s.matches("-\\d+(\\.\\d+)?[a-z]*")) return FOREVER;
        if (s.matches("\\d+")) return new KeepAlive(Duration.ofSeconds(Long.parseLong(s)));
        Matcher m = PART.matcher(s);
        long millis = 0;
        int end = 0;
        while (m.find() && m.start() == end) {
            double value = Double.parseDouble(m.group(1));
            millis += (long) (value * switch (m.group(2)) {
                case "ms" -> 1;
                case "s" -> 1_000;
                case "m" -> 60_000;
                default -> 3_600_000;
            });
            end = m.end();
        }
        if (s.isEmpty() || end != s.length()) {
            throw new IllegalArgumentException("must be a duration (5m, 300s, 1h30m, or seconds), -1 (forever) or 0 (unload when idle), not '"
                    + text + "'");
        }
        return new KeepAlive(Duration.ofMillis(millis));
    }

    @Override
    public String toString() {
        return forever() ? "-1" : duration.toMillis() % 1000 == 0 ? duration.toSeconds() + "s" : duration.toMillis() + "ms";
    }
}
