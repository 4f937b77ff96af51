package dev.ortserve.image;

import java.util.List;

/** The image placeholders a chat template renders, each replaced by its image's prompt text, in order. */
public final class Placeholders {

    private Placeholders() {
    }

    /** How many times {@code placeholder} occurs in {@code text}. */
    public static int count(String text, String placeholder) {
        int n = 0;
        for (int at = text.indexOf(placeholder); at >= 0; at = text.indexOf(placeholder, at + placeholder.length())) n++;
        return n;
    }

    /**
     * {@code text} with its i-th {@code placeholder} replaced by {@code images.get(i).promptText()}; the counts must be
     * equal (the caller checks them first, with {@link #count}).
     */
    public static String expand(String text, String placeholder, List<PixelValues> images) {
        if (count(text, placeholder) != images.size()) {
            throw new IllegalArgumentException("the text has " + count(text, placeholder) + " placeholders for " + images.size() + " images");
        }
        StringBuilder out = new StringBuilder(text.length() + images.stream().mapToInt(i -> i.promptText().length()).sum());
        int from = 0;
        for (PixelValues image : images) {
            int at = text.indexOf(placeholder, from);
            out.append(text, from, at).append(image.promptText());
            from = at + placeholder.length();
        }
        return out.append(text, from, text.length()).toString();
    }
}
