/*
 * The JVM fast path of spark_apps.validation.orders.parse_and_validate_orders.
 *
 * One streaming Jackson pass over a Kafka order value that returns the typed order ONLY when
 * the record is certainly structurally valid under the exact (variant-based) validator, i.e.
 * that validator would give none of empty_value, not_utf8, invalid_json, missing_field:*,
 * wrong_type:* or non_finite_amount, and its typed values equal the ones returned here. Every
 * input that is in any way unusual returns null, and Spark then runs the exact validator on it:
 * the fast path must be sound, it need not be complete. The value rules (order type, amount
 * bounds, event time) stay in Spark, for both paths; so does the parse of any orderedDateTime but
 * the plain form {@link #plainUtcMicros} reads (Spark's parse of that form was ~6 % of a live
 * batch's executor time, bench/results/history.md, "where a live 20,000/s batch's CPU goes").
 *
 * What the exact validator does, and why each rule below is safe (Spark 4.2, VariantBuilder):
 * try_parse_json parses the text with a default Jackson JsonFactory, stops after the first
 * value, rejects duplicate keys at any depth and lone surrogates in any string or key; integer
 * literals within long become integral variants, other numbers decimals when written without an
 * exponent with precision and scale <= 38, else doubles. schema_of_variant prints decimals with
 * trailing zeros stripped.
 *
 * Compiled by `make jvm` (javac --release 17 against the jars pyspark ships) into
 * .jvm/spark-jars/order-validator.jar; no other dependency.
 */
package io.github.revenueplatform.validation;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.YearMonth;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * {@code UDF1<byte[], Row>}: Kafka value bytes to the typed order struct, or null (fall back).
 *
 * <p>The struct's fields, in this order (the Python side declares the same type,
 * {@code spark_apps.validation.schemas.ORDER_FAST_PATH_SCHEMA}): order_id bigint, location_id string,
 * final_amount decimal(18,2), order_type string,
 * order_line_items array&lt;struct&lt;item string, count int, amount decimal(18,2)&gt;&gt;,
 * ordered_at_text string, ordered_at_us bigint (null unless {@link #plainUtcMicros} certifies it).
 */
public final class OrderFastPath implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;

  /** Larger values fall back (real orders are a few hundred bytes). */
  public static final int MAX_VALUE_BYTES = 64 * 1024;

  // DECIMAL(18,2): the money type of the platform (spark_apps/contract/records.py).
  private static final int MONEY_PRECISION = 18;
  private static final int MONEY_SCALE = 2;
  // Spark's variant decimals hold at most 38 digits of precision and scale; beyond that a
  // literal becomes a DOUBLE (wrong_type for money).
  private static final int VARIANT_MAX_DECIMAL_DIGITS = 38;

  // Stricter than Jackson's defaults (which Spark's parser uses): anything that deep or long is
  // not an ordinary order and falls back, so no limit can make this parser accept what Spark's
  // rejects. Duplicate keys at any depth raise, as they make try_parse_json fail.
  private static final JsonFactory JSON =
      JsonFactory.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxNestingDepth(32)
                  .maxNumberLength(64)
                  .maxNameLength(1024)
                  .maxStringLength(MAX_VALUE_BYTES)
                  .maxDocumentLength(MAX_VALUE_BYTES)
                  .build())
          .build();

  // What a byte scan of the value found (see scan()).
  private static final int SCAN_REJECT = -1;
  private static final int SCAN_ASCII = 0;
  private static final int SCAN_NON_ASCII = 1;

  @Override
  public Row call(byte[] value) {
    if (value == null || value.length == 0 || value.length > MAX_VALUE_BYTES || value[0] != '{') {
      return null;
    }
    int scan = scan(value);
    if (scan == SCAN_REJECT) {
      return null;
    }
    String text = scan == SCAN_ASCII ? new String(value, StandardCharsets.ISO_8859_1) : strictUtf8(value);
    if (text == null) {
      return null;
    }
    boolean mayHaveEscapes = text.indexOf("\\u") >= 0;
    try (JsonParser parser = JSON.createParser(text)) {
      return parseOrder(parser, mayHaveEscapes);
    } catch (IOException | RuntimeException malformedOrUnusual) {
      return null;
    }
  }

  /**
   * One pass over the bytes: non-ASCII or not, and reject what the fast path never certifies:
   * a 4-byte UTF-8 sequence (its Java chars are surrogates) and anything but JSON whitespace
   * after the last '}' (try_parse_json ignores trailing content; the exact path has its own
   * rule for it).
   */
  private static int scan(byte[] value) {
    int end = value.length - 1;
    while (end > 0 && isJsonWhitespace(value[end])) {
      end--;
    }
    if (value[end] != '}') {
      return SCAN_REJECT;
    }
    int result = SCAN_ASCII;
    for (byte b : value) {
      if (b < 0) {
        if ((b & 0xF8) == 0xF0) {
          return SCAN_REJECT;
        }
        result = SCAN_NON_ASCII;
      }
    }
    return result;
  }

  private static boolean isJsonWhitespace(byte b) {
    return b == ' ' || b == '\t' || b == '\n' || b == '\r';
  }

  /** Strict UTF-8 (malformed or unmappable input reports, no replacement, no BOM skipping). */
  private static String strictUtf8(byte[] value) {
    try {
      CharBuffer chars =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .decode(ByteBuffer.wrap(value));
      return chars.toString();
    } catch (CharacterCodingException notUtf8) {
      return null;
    }
  }

  private static Row parseOrder(JsonParser parser, boolean mayHaveEscapes) throws IOException {
    if (parser.nextToken() != JsonToken.START_OBJECT) {
      return null;
    }
    Long orderId = null;
    String locationId = null;
    BigDecimal finalAmount = null;
    String orderType = null;
    String orderedAt = null;
    List<Row> lineItems = null;
    JsonToken token;
    while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
      String name = parser.currentName();
      JsonToken valueToken = parser.nextToken();
      switch (name) {
        case "orderId":
          orderId = longValue(parser, valueToken);
          if (orderId == null) {
            return null;
          }
          break;
        case "locationId":
          locationId = plainString(parser, valueToken);
          if (locationId == null) {
            return null;
          }
          break;
        case "finalAmount":
          finalAmount = money(parser, valueToken);
          if (finalAmount == null) {
            return null;
          }
          break;
        case "orderType":
          orderType = plainString(parser, valueToken);
          if (orderType == null) {
            return null;
          }
          break;
        case "orderedDateTime":
          orderedAt = plainString(parser, valueToken);
          if (orderedAt == null) {
            return null;
          }
          break;
        case "orderLineItems":
          if (valueToken == JsonToken.START_ARRAY) {
            lineItems = lineItems(parser);
            if (lineItems == null) {
              return null;
            }
          } else if (valueToken != JsonToken.VALUE_NULL) {
            return null;
          }
          break;
        default:
          // An unknown field is ignored by the exact path, but it is still parsed there: it
          // must tokenize (a malformed one raises here) and hold no lone surrogate.
          if (mayHaveEscapes && hasSurrogate(name)) {
            return null;
          }
          if (!skipValue(parser, valueToken, mayHaveEscapes)) {
            return null;
          }
      }
    }
    if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
      return null;
    }
    if (orderId == null
        || locationId == null
        || finalAmount == null
        || orderType == null
        || orderedAt == null
        || !notBlank(locationId)) {
      return null;
    }
    return RowFactory.create(
        orderId, locationId, finalAmount, orderType, lineItems, orderedAt, plainUtcMicros(orderedAt));
  }

  private static final long MICROS_PER_SECOND = 1_000_000L;
  private static final long[] FRACTION_SCALE = {0, 100_000, 10_000, 1_000, 100, 10, 1};

  /**
   * orderedDateTime as microseconds since 1970-01-01T00:00:00Z when it is a valid date and time of
   * exactly the form yyyy-MM-ddTHH:mm:ss, optionally followed by '.' and 1 to 6 digits, with a
   * year from 0001 to 9999, ASCII digits only; null otherwise. Spark's parse of the text plus "Z"
   * with ORDERED_AT_PATTERN (yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX, strict resolution) gives the same
   * instant for every text accepted here, and Spark still parses every other text itself.
   */
  static Long plainUtcMicros(String text) {
    int length = text.length();
    if (length < 19 || length == 20 || length > 26) {
      return null;
    }
    if (text.charAt(4) != '-'
        || text.charAt(7) != '-'
        || text.charAt(10) != 'T'
        || text.charAt(13) != ':'
        || text.charAt(16) != ':') {
      return null;
    }
    int year = digits(text, 0, 4);
    int month = digits(text, 5, 2);
    int day = digits(text, 8, 2);
    int hour = digits(text, 11, 2);
    int minute = digits(text, 14, 2);
    int second = digits(text, 17, 2);
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23) {
      return null;
    }
    if (minute < 0 || minute > 59 || second < 0 || second > 59) {
      return null;
    }
    if (day > YearMonth.of(year, month).lengthOfMonth()) {
      return null;
    }
    long fraction = 0;
    if (length > 19) {
      if (text.charAt(19) != '.') {
        return null;
      }
      int fractionDigits = length - 20;
      int value = digits(text, 20, fractionDigits);
      if (value < 0) {
        return null;
      }
      fraction = value * FRACTION_SCALE[fractionDigits];
    }
    long days = LocalDate.of(year, month, day).toEpochDay();
    long seconds = days * 86_400L + hour * 3_600L + minute * 60L + second;
    return seconds * MICROS_PER_SECOND + fraction;
  }

  /** The number written by `count` ASCII digits from `start`, or -1 if any is not one. */
  private static int digits(String text, int start, int count) {
    int value = 0;
    for (int i = start; i < start + count; i++) {
      char c = text.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value;
  }

  /** Line items: objects whose only keys are item (string), count (int) and amount (money);
   * a key may be absent or JSON null (the typed field is then null). Anything else: null. */
  private static List<Row> lineItems(JsonParser parser) throws IOException {
    List<Row> items = new ArrayList<>();
    JsonToken token;
    while ((token = parser.nextToken()) != JsonToken.END_ARRAY) {
      if (token != JsonToken.START_OBJECT) {
        return null;
      }
      String item = null;
      Integer count = null;
      BigDecimal amount = null;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken valueToken = parser.nextToken();
        boolean isNull = valueToken == JsonToken.VALUE_NULL;
        switch (name) {
          case "item":
            item = isNull ? null : plainString(parser, valueToken);
            if (!isNull && item == null) {
              return null;
            }
            break;
          case "count":
            count = isNull ? null : intValue(parser, valueToken);
            if (!isNull && count == null) {
              return null;
            }
            break;
          case "amount":
            amount = isNull ? null : money(parser, valueToken);
            if (!isNull && amount == null) {
              return null;
            }
            break;
          default:
            return null;
        }
      }
      if (token != JsonToken.END_OBJECT) {
        return null;
      }
      items.add(RowFactory.create(item, count, amount));
    }
    return items;
  }

  /** A string without surrogate chars (lone ones fail the exact parse; pairs are left to it). */
  private static String plainString(JsonParser parser, JsonToken token) throws IOException {
    if (token != JsonToken.VALUE_STRING) {
      return null;
    }
    String text = parser.getText();
    return hasSurrogate(text) ? null : text;
  }

  private static boolean hasSurrogate(String text) {
    for (int i = 0; i < text.length(); i++) {
      if (Character.isSurrogate(text.charAt(i))) {
        return true;
      }
    }
    return false;
  }

  /** Not blank under Spark's trim (which strips ' ' only); stricter: no control char or space at
   * either end. */
  private static boolean notBlank(String text) {
    return !text.isEmpty() && text.charAt(0) > ' ' && text.charAt(text.length() - 1) > ' ';
  }

  /** An integer literal within long (the exact path: an integral variant read as bigint). */
  private static Long longValue(JsonParser parser, JsonToken token) throws IOException {
    if (token != JsonToken.VALUE_NUMBER_INT) {
      return null;
    }
    JsonParser.NumberType type = parser.getNumberType();
    if (type != JsonParser.NumberType.INT && type != JsonParser.NumberType.LONG) {
      return null;
    }
    return parser.getLongValue();
  }

  private static Integer intValue(JsonParser parser, JsonToken token) throws IOException {
    Long value = longValue(parser, token);
    if (value == null || value != value.intValue()) {
      return null;
    }
    return value.intValue();
  }

  /**
   * Exact money: an integer literal within long, or a decimal literal without exponent whose
   * precision and scale fit a variant decimal (<= 38), with at most two fractional digits after
   * stripping trailing zeros, that fits DECIMAL(18,2). Returned at scale 2.
   */
  private static BigDecimal money(JsonParser parser, JsonToken token) throws IOException {
    BigDecimal exact;
    if (token == JsonToken.VALUE_NUMBER_INT) {
      Long value = longValue(parser, token);
      if (value == null) {
        return null;
      }
      exact = BigDecimal.valueOf(value);
    } else if (token == JsonToken.VALUE_NUMBER_FLOAT) {
      String text = parser.getText();
      for (int i = 0; i < text.length(); i++) {
        char c = text.charAt(i);
        if (c != '-' && c != '.' && (c < '0' || c > '9')) {
          return null;
        }
      }
      exact = new BigDecimal(text);
      if (exact.scale() > VARIANT_MAX_DECIMAL_DIGITS
          || exact.precision() > VARIANT_MAX_DECIMAL_DIGITS) {
        return null;
      }
    } else {
      return null;
    }
    if (exact.stripTrailingZeros().scale() > MONEY_SCALE) {
      return null;
    }
    BigDecimal money = exact.setScale(MONEY_SCALE, RoundingMode.UNNECESSARY);
    return money.precision() > MONEY_PRECISION ? null : money;
  }

  /** Tokenize one value (a scalar or a whole object/array). With escapes in the document, every
   * string and key inside must be surrogate-free. False when it is not. */
  private static boolean skipValue(JsonParser parser, JsonToken token, boolean checkStrings)
      throws IOException {
    if (!checkStrings) {
      parser.skipChildren();
      return true;
    }
    int depth = 0;
    do {
      switch (token) {
        case START_OBJECT:
        case START_ARRAY:
          depth++;
          break;
        case END_OBJECT:
        case END_ARRAY:
          depth--;
          break;
        case FIELD_NAME:
        case VALUE_STRING:
          if (hasSurrogate(parser.getText())) {
            return false;
          }
          break;
        default:
          break;
      }
    } while (depth > 0 && (token = parser.nextToken()) != null);
    return depth == 0;
  }
}
