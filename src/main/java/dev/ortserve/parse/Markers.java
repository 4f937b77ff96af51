package dev.ortserve.parse;

/** Text helpers for formats that open calls with a marker. */
final class Markers {

    private Markers() {
    }

    /** Length of the longest proper prefix of one of {@code markers} that {@code text} ends with. */
    static int partialSuffix(String text, String... markers) {
        int best = 0;
        for (String marker : markers) {
            for (int n = Math.min(marker.length() - 1, text.length()); n > best; n--) {
                if (text.endsWith(marker.substring(0, n))) {
                    best = n;
                    break;
                }
            }
        }
        return best;
    }

    /** Content before the first call: the text before the marker without trailing blanks; null when nothing is left. */
    static String contentBefore(String text, int marker) {
        String c = text.substring(0, marker).stripTrailing();
        return c.isEmpty() ? null : c;
    }

    /**
     * Content certain while no call marker has appeared: everything but a tail that may still begin
     * the marker, and trailing blanks (dropped if a call follows, kept if none does).
     */
    static String heldContent(String text, String marker) {
        return text.substring(0, text.length() - partialSuffix(text, marker)).stripTrailing();
    }

    static int skipBlank(String text, int at) {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++;
        return at;
    }
}
