package dev.ortserve.service.prompt;

import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * Python's str methods that chat templates call ({@code content.split('</think>')[-1].lstrip('\n')}),
 * with Python semantics: split on a literal separator keeping empty parts, strip with a character
 * set. Other method calls fall through to Jinjava's own resolver.
 */
final class PythonStringMethods extends ELResolver {

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (!(base instanceof String s) || method == null) {
            return null;
        }
        Object[] args = params == null ? new Object[0] : params;
        Object result = switch (method.toString()) {
            case "strip" -> strip(s, arg(args, 0), true, true);
            case "lstrip" -> strip(s, arg(args, 0), true, false);
            case "rstrip" -> strip(s, arg(args, 0), false, true);
            case "split" -> split(s, arg(args, 0), args.length > 1 ? ((Number) args[1]).intValue() : -1);
            case "startswith" -> args.length > 0 && s.startsWith(String.valueOf(args[0]));
            case "endswith" -> args.length > 0 && s.endsWith(String.valueOf(args[0]));
            case "upper" -> s.toUpperCase(java.util.Locale.ROOT);
            case "lower" -> s.toLowerCase(java.util.Locale.ROOT);
            case "replace" -> args.length >= 2 ? s.replace(String.valueOf(args[0]), String.valueOf(args[1])) : null;
            case "find" -> args.length > 0 ? s.indexOf(String.valueOf(args[0])) : null;
            case "count" -> args.length > 0 ? count(s, String.valueOf(args[0])) : null;
            default -> null;
        };
        if (result != null) {
            context.setPropertyResolved(true);
        }
        return result;
    }

    private static String arg(Object[] args, int i) {
        return args.length > i && args[i] != null ? String.valueOf(args[i]) : null;
    }

    static String strip(String s, String chars, boolean left, boolean right) {
        int start = 0, end = s.length();
        if (left) while (start < end && stripped(s.charAt(start), chars)) start++;
        if (right) while (end > start && stripped(s.charAt(end - 1), chars)) end--;
        return s.substring(start, end);
    }

    private static boolean stripped(char c, String chars) {
        return chars == null ? Character.isWhitespace(c) : chars.indexOf(c) >= 0;
    }

    static List<String> split(String s, String sep, int maxSplit) {
        List<String> out = new ArrayList<>();
        if (sep == null) {
            for (String part : s.trim().split("\\s+")) if (!part.isEmpty()) out.add(part);
            return out;
        }
        int from = 0, at;
        while ((maxSplit < 0 || out.size() < maxSplit) && (at = s.indexOf(sep, from)) >= 0) {
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    private static int count(String s, String sub) {
        if (sub.isEmpty()) return s.length() + 1;
        int n = 0;
        for (int at = s.indexOf(sub); at >= 0; at = s.indexOf(sub, at + sub.length())) n++;
        return n;
    }

    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {
    }

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return true;
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return null;
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }
}
