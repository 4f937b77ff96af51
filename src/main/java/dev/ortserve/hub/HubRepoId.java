package dev.ortserve.hub;

import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A model repository on the Hugging Face Hub: {@code owner/name}, a revision (branch, tag or
 * commit; default {@code main}) and an optional subfolder whose files are served.
 * Written {@code owner/name}, {@code owner/name@revision} or {@code owner/name@revision:sub/folder}.
 */
public record HubRepoId(String repo, String revision, String subfolder) {

    public static final String DEFAULT_REVISION = "main";
    // the Hub's own rule for repo names: letters, digits, '-', '_', '.'; no '--' or '..', no leading/trailing '-' or '.'
    private static final Pattern PART = Pattern.compile("[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?");
    private static final Pattern REVISION = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,254}");

    public HubRepoId {
        if (revision == null || revision.isEmpty()) revision = DEFAULT_REVISION;
        if (subfolder == null) subfolder = "";
        subfolder = subfolder.replaceAll("^/+|/+$", "");
    }

    /** The id when {@code text} is written like one, else empty (a local path, say). */
    public static Optional<HubRepoId> parse(String text) {
        if (text == null) return Optional.empty();
        String rest = text.strip();
        String subfolder = "";
        String revision = DEFAULT_REVISION;
        int at = rest.indexOf('@');
        if (at >= 0) {
            String rev = rest.substring(at + 1);
            rest = rest.substring(0, at);
            int colon = rev.indexOf(':');
            if (colon >= 0) {
                subfolder = rev.substring(colon + 1);
                rev = rev.substring(0, colon);
            }
            if (!REVISION.matcher(rev).matches() || rev.contains("..")) return Optional.empty();
            revision = rev;
        }
        String[] parts = rest.split("/", -1);
        if (parts.length != 2) return Optional.empty();
        for (String part : parts) {
            if (!PART.matcher(part).matches() || part.contains("--") || part.contains("..")) return Optional.empty();
        }
        if (subfolder.contains("..")) return Optional.empty();
        return Optional.of(new HubRepoId(rest, revision, subfolder));
    }

    /** huggingface_hub's folder name for the repo in the cache: models--owner--name. */
    public String cacheFolderName() {
        return "models--" + repo.replace("/", "--");
    }

    public HubRepoId withRevision(String rev) {
        return new HubRepoId(repo, rev, subfolder);
    }

    @Override
    public String toString() {
        boolean plain = DEFAULT_REVISION.equals(revision) && subfolder.isEmpty();
        return repo + (plain ? "" : "@" + revision) + (subfolder.isEmpty() ? "" : ":" + subfolder);
    }
}
