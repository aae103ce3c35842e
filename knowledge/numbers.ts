/**
 * Numbers as the articles write them and as customers do (issue 37): "10,000 mm", "10.000 mm" and
 * "10000mm" are one number and one unit, but Postgres's parser reads "10,000" as two numbers ("10"
 * and "000") and "10000mm" as one word, so a customer comparing waterproof ratings matched nothing
 * of the article that gives them. The articles (at sync) and the customer's words (at search) are
 * both put in one form: thousands written without separators, a unit apart from its number. Pure.
 */

/** A number grouped in thousands by commas, dots or narrow spaces ("10,000", "1.500", "12 500"), not a decimal ("7.95", "1,500.50"). */
const GROUPED_THOUSANDS = /(?<![\d.,])(\d{1,3})((?:[,.\u00a0\u202f]\d{3})+)(?![\d]|[.,]\d)/g;

/** A unit written against its number ("1500mm", "40L", "2kg"): lengths, weights and volumes. */
const GLUED_UNIT = /(\d)(mm|cm|km|kg|ml|m|g|l)(?![\p{L}\p{N}])/giu;

export const normaliseNumbers = (text: string): string =>
  text
    .replace(GROUPED_THOUSANDS, (_match, head: string, groups: string) => head + groups.replace(/[^\d]/g, ''))
    .replace(GLUED_UNIT, '$1 $2');
