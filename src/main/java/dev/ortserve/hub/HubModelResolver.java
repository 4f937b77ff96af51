package dev.ortserve.hub;

import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Makes the files of a Hub model that serving needs available in the huggingface_hub cache and
 * returns the snapshot directory to load from. Online, the revision is resolved to its commit and
 * only the files the {@link FileSelection} picks are fetched (each blob once, under a lock shared
 * by every process using the cache; verified against its sha256 and moved into place whole).
 * Offline (HF_HUB_OFFLINE=1) or when the Hub cannot be reached, the cached snapshot of the
 * revision is used if it holds the files.
 */
public final class HubModelResolver {

    private static final Logger LOG = Logger.getLogger(HubModelResolver.class);
    private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");
    private static final java.time.Duration QUICK = java.time.Duration.ofSeconds(10);

    /** Picks, from a revision's file names (relative to the subfolder), the ones to fetch; throws when the model is not there. */
    public interface FileSelection {
        Set<String> select(List<String> files);
    }

    /**
     * @param directory  the snapshot directory (with the subfolder) to load the model from
     * @param commit     the commit it holds
     * @param fromCache  true when the Hub was not asked (offline) or could not be reached
     * @param downloaded files fetched by this call (the others were in the cache)
     */
    public record Resolved(Path directory, HubRepoId id, String commit, boolean fromCache, List<String> downloaded) {
        public String source() {
            return id.repo() + "@" + commit.substring(0, Math.min(12, commit.length())) + (id.subfolder().isEmpty() ? "" : ":" + id.subfolder());
        }
    }

    private final HubSettings settings;
    private final HubClient client;

    public HubModelResolver(HubSettings settings) {
        this.settings = settings;
        this.client = new HubClient(settings);
    }

    public Resolved resolve(HubRepoId id, FileSelection selection) {
        HubCache cache = new HubCache(settings.cacheDir(), id);
        if (settings.offline()) {
            return fromCache(id, cache, selection, "HF_HUB_OFFLINE is set");
        }
        HubClient.RevisionInfo info;
        // with the revision's snapshot cached, a Hub that does not answer quickly is not waited for long (as huggingface_hub's
        // 10 s metadata timeout): the cache serves
        Optional<String> cachedCommit = cache.commitFor(id.revision()).filter(c -> Files.isDirectory(cache.snapshot(c)));
        HubClient revisions = cachedCommit.isEmpty() ? client
                : new HubClient(settings.withRetries(Math.min(2, settings.attempts()), settings.backoff())
                        .withTimeout(settings.timeout().compareTo(QUICK) < 0 ? settings.timeout() : QUICK));
        try {
            info = revisions.revision(id);
        } catch (HubException e) {
            if (e.kind() != HubException.Kind.UNREACHABLE) throw e;
            if (cachedCommit.isEmpty()) {
                throw new HubException(HubException.Kind.UNREACHABLE, e.getMessage() + "; and the cache " + settings.cacheDir()
                        + " has no snapshot of " + id + " to start from", e);
            }
            LOG.warnf("The Hub cannot be reached (%s): serving %s from the cached snapshot %s", e.getMessage(), id, cachedCommit.get());
            return fromCache(id, cache, selection, "the Hub cannot be reached");
        }
        String prefix = id.subfolder().isEmpty() ? "" : id.subfolder() + "/";
        List<String> names = new ArrayList<>();
        for (HubClient.RepoFile f : info.files()) {
            if (f.path().startsWith(prefix)) names.add(f.path().substring(prefix.length()));
        }
        if (names.isEmpty()) {
            throw new HubException(HubException.Kind.NOT_FOUND, id.repo() + "@" + id.revision() + " has no files"
                    + (prefix.isEmpty() ? "" : " under " + id.subfolder()));
        }
        Set<String> wanted = new TreeSet<>(selection.select(names));
        cache.tagCacheDir();
        List<String> downloaded = new ArrayList<>();
        try {
            for (String rel : wanted) {
                String file = prefix + rel;
                Path pointer = cache.snapshot(info.commit()).resolve(file);
                if (Files.exists(pointer)) continue; // a symlink whose blob is there
                Optional<String> sha256 = info.files().stream().filter(f -> f.path().equals(file)).findFirst().flatMap(HubClient.RepoFile::sha256);
                if (fetch(id, cache, info.commit(), file, sha256)) downloaded.add(file);
            }
            cache.writeRef(id.revision(), info.commit());
        } catch (IOException e) {
            throw new UncheckedIOException("Cannot write the Hub cache " + settings.cacheDir() + ": " + e.getMessage(), e);
        }
        Path dir = cache.snapshot(info.commit()).resolve(id.subfolder());
        LOG.infof("Hub model %s is commit %s: %d files in %s (%d downloaded)", id, info.commit(), wanted.size(), dir, downloaded.size());
        return new Resolved(dir, id, info.commit(), false, List.copyOf(downloaded));
    }

    /** Fetches one file into its blob (unless another process did meanwhile) and links it into the snapshot; true if downloaded here. */
    private boolean fetch(HubRepoId id, HubCache cache, String commit, String file, Optional<String> listedSha256) throws IOException {
        HubClient.FileMeta meta = client.head(id, commit, file);
        Path blob = cache.blob(meta.etag());
        boolean downloaded = false;
        try (HubCache.BlobLock lock = cache.lock(meta.etag())) {
            if (!Files.exists(blob)) {
                Files.createDirectories(blob.getParent());
                Path partial = blob.resolveSibling(meta.etag() + ".incomplete");
                long size = meta.size().orElse(-1);
                checkSpace(partial.getParent(), size - (Files.exists(partial) ? Files.size(partial) : 0), file);
                DownloadProgress progress = new DownloadProgress(file, settings.progressInterval());
                Optional<String> expected = SHA256.matcher(meta.etag()).matches() ? Optional.of(meta.etag()) : listedSha256;
                for (int attempt = 1; ; attempt++) {
                    client.download(id, commit, file, partial, size, progress);
                    String problem = verify(partial, size, expected);
                    if (problem == null) break;
                    Files.deleteIfExists(partial);
                    if (attempt >= 2) {
                        throw new HubException(HubException.Kind.CORRUPT, "Downloaded " + file + " of " + id + " does not match the Hub's "
                                + problem + " (twice): not used. Check proxies between this host and " + settings.endpoint());
                    }
                    LOG.warnf("Downloaded %s does not match the Hub's %s: downloading it again", file, problem);
                }
                HubCache.moveAtomically(partial, blob);
                progress.done(Files.size(blob));
                downloaded = true;
            }
            cache.link(commit, file, meta.etag());
        }
        return downloaded;
    }

    private static String verify(Path file, long size, Optional<String> sha256) throws IOException {
        if (size >= 0 && Files.size(file) != size) return "size (" + size + " bytes, got " + Files.size(file) + ")";
        if (sha256.isEmpty()) return null;
        MessageDigest digest;
        try {
            digest = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        try (InputStream in = Files.newInputStream(file)) {
            byte[] buffer = new byte[1 << 16];
            int n;
            while ((n = in.read(buffer)) >= 0) digest.update(buffer, 0, n);
        }
        String actual = HexFormat.of().formatHex(digest.digest());
        return actual.equals(sha256.get()) ? null : "sha256 (" + sha256.get() + ", got " + actual + ")";
    }

    private void checkSpace(Path dir, long needed, String file) throws IOException {
        if (needed <= 0) return;
        long free = Files.getFileStore(dir).getUsableSpace();
        if (free < needed) {
            throw new HubException(HubException.Kind.DISK_FULL, "Not enough disk space in " + settings.cacheDir() + " for " + file + ": it needs "
                    + DownloadProgress.bytes(needed) + ", " + DownloadProgress.bytes(free) + " are free");
        }
    }

    private Resolved fromCache(HubRepoId id, HubCache cache, FileSelection selection, String why) {
        String commit = cache.commitFor(id.revision()).orElseThrow(() -> new HubException(HubException.Kind.OFFLINE_MISS,
                why.substring(0, 1).toUpperCase(Locale.ROOT) + why.substring(1) + " and the cache " + settings.cacheDir() + " has no snapshot of "
                        + id.repo() + " at revision '" + id.revision() + "' (no " + cache.repoDir().resolve("refs").resolve(id.revision()) + ")"));
        Path dir = cache.snapshot(commit).resolve(id.subfolder());
        if (!Files.isDirectory(dir)) {
            throw new HubException(HubException.Kind.OFFLINE_MISS, why + ", and the cached snapshot " + dir + " of " + id + " does not exist");
        }
        List<String> present = new ArrayList<>();
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.filter(Files::isRegularFile).forEach(p -> present.add(dir.relativize(p).toString().replace('\\', '/')));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Set<String> wanted = selection.select(present);
        LOG.infof("Hub model %s from the cache (%s): commit %s, %d files in %s", id, why, commit, wanted.size(), dir);
        return new Resolved(dir, id, commit, true, List.of());
    }
}
