package dev.ortserve.it.soak;

import javax.imageio.ImageIO;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The soak's summary ({@code summary.md}: what ran, the faults, each endpoint's counts and latency, each resource's
 * slope over the second half, the p99 of the first and last window, the end checks) and its picture ({@code soak.png}:
 * one panel a resource, a line a replica, the faults marked).
 */
final class Report {

    private Report() {
    }

    static long percentile(List<Long> sorted, double p) {
        if (sorted.isEmpty()) return 0;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, (int) Math.ceil(p / 100 * sorted.size()) - 1)));
    }

    /** Least-squares slope of y over minutes, per 10 minutes, for the rows at or after {@code from} minutes. */
    static double[] slopeAndMean(List<Map<String, Double>> rows, String key, double from) {
        double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (Map<String, Double> row : rows) {
            double x = row.get("minute"), y = row.getOrDefault(key, Double.NaN);
            if (x < from || Double.isNaN(y)) continue;
            n++;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        if (n < 3) return new double[] {Double.NaN, Double.NaN};
        double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        return new double[] {slope * 10, sy / n};
    }

    /**
     * The series averaged over the {@code cycle} minutes up to each row (rows with a whole cycle behind them): the
     * rotating models' turns make every resource a square wave of that period, whose least-squares slope over a few
     * periods says more about where the run stopped in the cycle than about a leak (3A / (N^2 P) for amplitude A over N
     * periods of P); a moving average over exactly one period cancels it and leaves the trend.
     */
    static List<Map<String, Double>> cycleAveraged(List<Map<String, Double>> rows, String key, double cycle) {
        List<Map<String, Double>> out = new ArrayList<>();
        if (rows.isEmpty()) return out;
        double start = rows.get(0).get("minute");
        for (int i = 0; i < rows.size(); i++) {
            double x = rows.get(i).get("minute");
            if (x - cycle < start) continue;
            double sum = 0;
            int n = 0;
            for (int j = i; j >= 0 && rows.get(j).get("minute") > x - cycle; j--) {
                double y = rows.get(j).getOrDefault(key, Double.NaN);
                if (Double.isNaN(y)) continue;
                sum += y;
                n++;
            }
            if (n > 0) out.add(Map.of("minute", x, key, sum / n));
        }
        return out;
    }

    static Soak.Result write(Soak soak, Checks checks, double minutes) throws IOException {
        List<Soak.Outcome> outcomes;
        synchronized (soak.outcomes) {
            outcomes = new ArrayList<>(soak.outcomes);
        }
        // every request as it ended (minute from the drive's start, operation, latency, outcome): an operation's late p99
        // placed in time, which the sampled series (every operation together) cannot
        StringBuilder raw = new StringBuilder("minute,op,ms,result\n");
        for (Soak.Outcome o : outcomes) {
            raw.append(String.format(java.util.Locale.ROOT, "%.4f,%s,%.1f,%s%n", (o.atMillis() - soak.driveStart) / 60_000.0, o.op(),
                    o.micros() / 1000.0, o.result().replace(',', ';').replace('\n', ' ')));
        }
        java.nio.file.Files.writeString(soak.options.results().resolve("outcomes.csv"), raw);
        List<Map<String, Double>> rows;
        synchronized (soak.samples) {
            rows = new ArrayList<>(soak.samples);
        }
        StringBuilder out = new StringBuilder();
        out.append(String.format("## Soak: %.1f minutes, %d clients, two replicas, one Redis (seed %d)%n%n", minutes, soak.options.clients(),
                soak.options.seed()));
        out.append(String.format("Models: tiny (pinned), %s and llama with adapters llama-alpha / llama-beta taking turns every %d s "
                + "(models-max-loaded 2, keep_alive 10-30 s), all-minilm-l6-v2 embeddings; store TTL %d min. Host: %d CPUs.%n%n",
                soak.options.realSize() ? "qwen3 (Qwen3-0.6B's shape, random weights, int4)" : "demo", soak.options.phase().toSeconds(),
                soak.options.storeTtl().toMinutes(), Runtime.getRuntime().availableProcessors()));
        if (!soak.options.env().isEmpty()) out.append("Both replicas (the setting under test in this run): ").append(soak.options.env()).append(".\n\n");
        if (!soak.options.envA().isEmpty()) out.append("Replica a only (the experiment of this run): ").append(soak.options.envA()).append(".\n\n");
        out.append("Faults: ");
        synchronized (soak.faultTimes) {
            for (Map.Entry<Double, String> f : soak.faultTimes) out.append(String.format("%s at %.1f min; ", f.getValue(), f.getKey()));
        }
        out.append("websockets opened ").append(soak.faults.getOrDefault("websocket opened", new java.util.concurrent.atomic.AtomicLong()).get()).append(".\n\n");

        // per endpoint
        double window = Math.min(10, minutes / 3) * 60_000;
        long driveStart = soak.driveStart, end = driveStart + (long) (minutes * 60_000);
        Map<String, List<Long>> all = new TreeMap<>(), first = new TreeMap<>(), last = new TreeMap<>();
        // the same comparison over the first and the last whole rotation cycle (each model's turn once in both): the
        // 10-minute windows hold different shares of the real-size model's turns, whose requests are the slowest
        long cycleMillis = 2 * soak.options.phase().toMillis();
        long cycles = (end - driveStart) / cycleMillis;
        long lastCycleStart = driveStart + (cycles - 1) * cycleMillis;
        Map<String, List<Long>> firstCycle = new TreeMap<>(), lastCycle = new TreeMap<>();
        Map<String, Map<String, Long>> results = new TreeMap<>();
        for (Soak.Outcome o : outcomes) {
            results.computeIfAbsent(o.op(), k -> new TreeMap<>()).merge(o.result(), 1L, Long::sum);
            if (!o.result().equals("ok")) continue;
            all.computeIfAbsent(o.op(), k -> new ArrayList<>()).add(o.micros());
            if (o.atMillis() <= driveStart + window) first.computeIfAbsent(o.op(), k -> new ArrayList<>()).add(o.micros());
            if (o.atMillis() >= end - window) last.computeIfAbsent(o.op(), k -> new ArrayList<>()).add(o.micros());
            if (cycles >= 2 && o.atMillis() < driveStart + cycleMillis) firstCycle.computeIfAbsent(o.op(), k -> new ArrayList<>()).add(o.micros());
            if (cycles >= 2 && o.atMillis() >= lastCycleStart && o.atMillis() < lastCycleStart + cycleMillis) {
                lastCycle.computeIfAbsent(o.op(), k -> new ArrayList<>()).add(o.micros());
            }
        }
        Map<String, double[]> p99FirstLast = new LinkedHashMap<>();
        out.append(String.format("| operation | requests | ok | p50 ms | p99 ms | p99 first %.0f min | p99 last %.0f min | last / first "
                + "| p99 first cycle | p99 last whole cycle | last / first (cycles) | other outcomes |%n", window / 60_000, window / 60_000));
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Map.Entry<String, Map<String, Long>> e : results.entrySet()) {
            List<Long> l = sorted(all.get(e.getKey())), f = sorted(first.get(e.getKey())), t = sorted(last.get(e.getKey()));
            long total = e.getValue().values().stream().mapToLong(Long::longValue).sum();
            double p99f = percentile(f, 99) / 1000.0, p99l = percentile(t, 99) / 1000.0;
            if (!f.isEmpty() && !t.isEmpty() && !e.getKey().equals("burst")) p99FirstLast.put(e.getKey(), new double[] {p99f, p99l});
            Map<String, Long> other = new TreeMap<>(e.getValue());
            other.remove("ok");
            double p99cf = percentile(sorted(firstCycle.get(e.getKey())), 99) / 1000.0, p99cl = percentile(sorted(lastCycle.get(e.getKey())), 99) / 1000.0;
            out.append(String.format("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %s |%n", e.getKey(), total, l.size(),
                    percentile(l, 50) / 1000.0, percentile(l, 99) / 1000.0, p99f, p99l, p99f > 0 ? p99l / p99f : Double.NaN,
                    p99cf, p99cl, p99cf > 0 ? p99cl / p99cf : Double.NaN, other.isEmpty() ? "" : other.toString()));
        }

        // resources
        Map<String, Double> slopes = new LinkedHashMap<>();
        double cycle = 2 * soak.options.phase().toSeconds() / 60.0; // the rotating models' period: both take a turn
        out.append(String.format("%nResources over the second half (from minute %.1f): mean, the least-squares slope per 10 minutes, and the slope of "
                + "the series averaged over one %.0f-minute rotation cycle (each model's turn once: the trend without the rotation's square wave; "
                + "blank where the half holds no whole cycle)%n%n", minutes / 2, cycle));
        out.append("| series | mean | slope / 10 min | slope, % of mean | cycle-averaged slope, % of mean |\n|---|---|---|---|---|\n");
        List<String> series = new ArrayList<>();
        for (Soak.Replica r : soak.replicas) for (String s : Sampler.PER_REPLICA) series.add(r.name + "." + s);
        series.addAll(List.of("redis.memory_mb", "redis.keys"));
        List<Map<String, Double>> loaded = rows.subList(0, Math.max(0, rows.size() - 1)); // the last row is taken after the load stops
        boolean wholeCycle = minutes / 2 >= cycle;
        for (String s : series) {
            double[] sm = slopeAndMean(loaded, s, minutes / 2);
            double percent = sm[1] != 0 ? 100 * sm[0] / Math.abs(sm[1]) : Double.NaN;
            double[] avg = wholeCycle ? slopeAndMean(cycleAveraged(loaded, s, cycle), s, minutes / 2) : new double[] {Double.NaN, Double.NaN};
            double averaged = avg[1] != 0 ? 100 * avg[0] / Math.abs(avg[1]) : Double.NaN;
            slopes.put(s, wholeCycle ? averaged : percent);
            out.append(String.format("| %s | %.2f | %+.3f | %+.2f%% | %s |%n", s, sm[1], sm[0], percent,
                    Double.isNaN(averaged) ? "" : String.format("%+.2f%%", averaged)));
        }

        // the end checks
        out.append(String.format("%nEnd checks: %d requests; %d responses stored, %d read back from the other replica (%d older than the TTL less a minute not checked), "
                + "%d lost; %d background runs (%d older than the TTL less a minute not checked), %d stuck; %d undocumented errors; replicas idle after the load: %s.%n",
                outcomes.size(), checks.checked + checks.expiredOrOld, checks.checked - checks.lost.size(), checks.expiredOrOld, checks.lost.size(),
                soak.background.size(), checks.backgroundOld, checks.stuck.size(), soak.undocumented.size(), checks.notIdle.isEmpty() ? "yes" : checks.notIdle));
        for (String s : checks.lost) out.append("- lost: ").append(s).append('\n');
        for (String s : checks.stuck) out.append("- stuck: ").append(s).append('\n');
        synchronized (soak.undocumented) {
            for (String s : soak.undocumented.subList(0, Math.min(20, soak.undocumented.size()))) out.append("- undocumented: ").append(s).append('\n');
        }
        String summary = out.toString();
        Files.writeString(soak.options.results().resolve("summary.md"), summary);
        plot(soak, rows);
        System.out.println(summary);
        List<String> undocumented;
        synchronized (soak.undocumented) {
            undocumented = new ArrayList<>(soak.undocumented);
        }
        return new Soak.Result(outcomes.size(), checks.checked, checks.lost, soak.background.size(), checks.stuck, undocumented, checks.notIdle,
                slopes, p99FirstLast, summary);
    }

    private static List<Long> sorted(List<Long> l) {
        List<Long> out = l == null ? new ArrayList<>() : new ArrayList<>(l);
        out.sort(null);
        return out;
    }

    /** A grid of small line charts, one a resource, replica a blue, b orange, Redis green; grey lines at the faults. */
    static void plot(Soak soak, List<Map<String, Double>> rows) throws IOException {
        String[][] panels = {
                {"RSS (MiB)", "rss_mb"}, {"heap used (MiB)", "heap_mb"}, {"direct buffers (MiB)", "direct_mb"}, {"NMT committed (MiB)", "nmt_mb"},
                {"threads", "threads"}, {"open fds", "fds"}, {"KV held (MiB)", "kv_held_mb"}, {"prefix cache (MiB)", "prefix_cache_mb"},
                {"queue", "queue"}, {"Redis memory (MiB)", "redis.memory_mb"}, {"Redis keys", "redis.keys"}, {"latency p99 / p50 (ms)", "p99_ms"}};
        int cols = 4, w = 420, h = 240, rowsN = (panels.length + cols - 1) / cols;
        BufferedImage image = new BufferedImage(cols * w, rowsN * h + 30, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = image.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, image.getWidth(), image.getHeight());
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        g.setColor(Color.BLACK);
        g.drawString(String.format("ortserve soak: %d clients, two replicas (a blue, b orange), Redis green; grey: faults; minutes on x", soak.options.clients()), 10, 18);
        double maxMinute = rows.isEmpty() ? 1 : rows.get(rows.size() - 1).get("minute");
        for (int p = 0; p < panels.length; p++) {
            int x0 = (p % cols) * w + 50, y0 = (p / cols) * h + 50, pw = w - 70, ph = h - 60;
            String key = panels[p][1];
            List<String> keys = key.startsWith("redis.") ? List.of(key) : key.equals("p99_ms") ? List.of("p99_ms", "p50_ms")
                    : List.of("a." + key, "b." + key);
            double lo = Double.MAX_VALUE, hi = -Double.MAX_VALUE;
            for (Map<String, Double> row : rows) {
                for (String k : keys) {
                    double v = row.getOrDefault(k, Double.NaN);
                    if (Double.isNaN(v) || Double.isInfinite(v)) continue;
                    lo = Math.min(lo, v);
                    hi = Math.max(hi, v);
                }
            }
            if (lo > hi) {
                lo = 0;
                hi = 1;
            }
            lo = Math.min(lo, 0);
            if (hi == lo) hi = lo + 1;
            g.setColor(Color.BLACK);
            g.drawString(panels[p][0], x0, y0 - 8);
            g.drawRect(x0, y0, pw, ph);
            g.drawString(String.format("%.0f", hi), x0 - 45, y0 + 10);
            g.drawString(String.format("%.0f", lo), x0 - 45, y0 + ph);
            g.drawString(String.format("%.0f", maxMinute), x0 + pw - 20, y0 + ph + 14);
            g.setColor(Color.LIGHT_GRAY);
            synchronized (soak.faultTimes) {
                for (Map.Entry<Double, String> f : soak.faultTimes) {
                    int fx = x0 + (int) (pw * f.getKey() / maxMinute);
                    g.drawLine(fx, y0, fx, y0 + ph);
                }
            }
            Color[] colors = key.startsWith("redis.") ? new Color[] {new Color(0x2ca02c)} : new Color[] {new Color(0x1f77b4), new Color(0xff7f0e)};
            g.setStroke(new BasicStroke(1.5f));
            for (int k = 0; k < keys.size(); k++) {
                g.setColor(colors[k % colors.length]);
                int px = -1, py = -1;
                for (Map<String, Double> row : rows) {
                    double v = row.getOrDefault(keys.get(k), Double.NaN);
                    if (Double.isNaN(v) || Double.isInfinite(v)) {
                        px = -1;
                        continue;
                    }
                    int x = x0 + (int) (pw * row.get("minute") / maxMinute), y = y0 + ph - (int) (ph * (v - lo) / (hi - lo));
                    if (px >= 0) g.drawLine(px, py, x, y);
                    px = x;
                    py = y;
                }
            }
            g.setStroke(new BasicStroke(1f));
        }
        g.dispose();
        ImageIO.write(image, "png", soak.options.results().resolve("soak.png").toFile());
    }
}
