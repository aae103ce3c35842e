import type { DateTime } from 'luxon';

/**
 * The acknowledgment a customer gets when a person must answer (HANDOFF_ACKNOWLEDGMENT): a short
 * text in the customer's language saying a person will answer, and by when (lib/business-hours.ts),
 * the time written the way that language writes it, in the team's time zone; and the holding text
 * a reviewer finds on a hand-off without a usable draft, in the same words. Pure. A language
 * without a text here gets the English one; the signature is appended by the caller.
 */

interface Phrases {
  /** luxon/Intl locale for the date. */
  locale: string;
  greeting: string;
  by: (when: string) => string;
  soon: string;
  /** The hand-off's holding text: what a reviewer finds to replace or approve when no usable draft exists. */
  holding: string;
  closing: string;
}

const PHRASES: Readonly<Record<string, Phrases>> = {
  en: {
    locale: 'en-GB',
    greeting: 'Hello,',
    by: (when) => `Thank you for your message. A member of our team will answer it by ${when}.`,
    soon: 'Thank you for your message. A member of our team will answer it as soon as possible.',
    holding: 'Thank you for your message. A member of our team will look into it and get back to you.',
    closing: 'Best regards,\nThe support team',
  },
  de: {
    locale: 'de-DE',
    greeting: 'Hallo,',
    by: (when) => `vielen Dank für Ihre Nachricht. Eine Person aus unserem Team antwortet Ihnen bis ${when}.`,
    soon: 'vielen Dank für Ihre Nachricht. Eine Person aus unserem Team antwortet Ihnen so bald wie möglich.',
    holding:
      'vielen Dank für Ihre Nachricht. Eine Person aus unserem Team sieht sie sich an und meldet sich bei Ihnen.',
    closing: 'Mit freundlichen Grüßen\nIhr Support-Team',
  },
  fr: {
    locale: 'fr-FR',
    greeting: 'Bonjour,',
    by: (when) => `Merci pour votre message. Un membre de notre équipe vous répondra d’ici le ${when}.`,
    soon: 'Merci pour votre message. Un membre de notre équipe vous répondra dès que possible.',
    holding: 'Merci pour votre message. Un membre de notre équipe va l’examiner et reviendra vers vous.',
    closing: 'Cordialement,\nL’équipe support',
  },
  es: {
    locale: 'es-ES',
    greeting: 'Hola:',
    by: (when) => `Gracias por su mensaje. Una persona de nuestro equipo le responderá antes del ${when}.`,
    soon: 'Gracias por su mensaje. Una persona de nuestro equipo le responderá lo antes posible.',
    holding: 'Gracias por su mensaje. Una persona de nuestro equipo lo revisará y se pondrá en contacto con usted.',
    closing: 'Un saludo,\nEl equipo de atención al cliente',
  },
  nl: {
    locale: 'nl-NL',
    greeting: 'Hallo,',
    by: (when) => `Bedankt voor uw bericht. Iemand van ons team beantwoordt het uiterlijk ${when}.`,
    soon: 'Bedankt voor uw bericht. Iemand van ons team beantwoordt het zo snel mogelijk.',
    holding: 'Bedankt voor uw bericht. Iemand van ons team bekijkt het en neemt contact met u op.',
    closing: 'Met vriendelijke groet,\nHet supportteam',
  },
  no: {
    locale: 'nb-NO',
    greeting: 'Hei,',
    by: (when) => `Takk for meldingen din. Noen i teamet vårt svarer deg innen ${when}.`,
    soon: 'Takk for meldingen din. Noen i teamet vårt svarer deg så snart som mulig.',
    holding: 'Takk for meldingen din. Noen i teamet vårt ser på den og tar kontakt med deg.',
    closing: 'Vennlig hilsen\nKundeservice',
  },
};

/** The languages with their own acknowledgment text (ISO 639-1). */
export const ACKNOWLEDGMENT_LANGUAGES = Object.keys(PHRASES);

const phrasesOf = (language: string | null): Phrases =>
  PHRASES[language === 'nb' || language === 'nn' ? 'no' : (language ?? 'en')] ?? PHRASES.en!;

export function acknowledgmentText(language: string | null, answerBy: DateTime | null): string {
  const phrases = phrasesOf(language);
  const when =
    answerBy === null
      ? null
      : answerBy.setLocale(phrases.locale).toLocaleString({
          weekday: 'long',
          day: 'numeric',
          month: 'long',
          hour: '2-digit',
          minute: '2-digit',
          timeZoneName: 'short',
        });
  return [phrases.greeting, '', when === null ? phrases.soon : phrases.by(when), '', phrases.closing].join('\n');
}

/**
 * The neutral text stored for a hand-off that has no usable draft (decided before drafting, or the
 * model's reply was unusable): a reviewer replaces or approves it, so it is written in the language
 * the customer will read, like the acknowledgment. Never sent without a person.
 */
export function holdingText(language: string | null): string {
  const phrases = phrasesOf(language);
  return [phrases.greeting, '', phrases.holding, '', phrases.closing].join('\n');
}
