package reqdetect

// langFR is the cue table of French (rule 9; languages.go reads it).
var langFR = &langTable{
	code: "fr", name: "French", presented: "ci-joint ci-jointe trouverez", attach: "pièce jointe",
	delivery:  "joindre joins joignez joigne joins-le joins-la attache attachez exporte* enregistre enregistrer enregistrez enregistre-le enregistre-la sauvegarde* téléverse* livrer livrez livre-moi publie* téléchargeable mets…disposition mettre…disposition téléchargement",
	send:      "envoie* envoyer envoyez renvoie* renvoyer renvoyez partage*",
	output:    "crée créer créez rédige* écris écrire écrivez génère générer générez produis produire prépare préparer préparez fais faites",
	transform: "convertis convertir convertissez transforme* tradui*",
	input:     "lis lire lisez résume résumer résumez analyse analyser analysez compare comparer examine vérifie* relis consulte* utilise* ouvre étudie regarde exécute* lance*",
	reply:     "réponds répondez répondre explique* dis-moi dites-moi", inline: "ici réponse",
	negators: "ne> n' pas aucun aucune sans> jamais rien", fileWords: "fichier fichiers",
	model:      "comme modèle gabarit exemple d'après basé basée basant inspiré même style suivant",
	modelNouns: "modèle exemple gabarit", destPreps: "en sous vers", namingPreps: "sous", sourcePreps: "depuis partir_de à_partir_de copie_de données_de",
	productNouns: "commande outil programme fonction bouton application service fonctionnalité",
	featureVerbs: "ajoute* implémente* intègre",
	whWords:      "qui que quoi quand pourquoi quel quelle quels quelles comment où", perfect: "ai as avons avez ont déjà",
	function:     "la les un une du au aux à pour avec dans sur cette merci ne pas le des est je tu vous nous ce ces mais très",
	deliverables: "livrables livrable fichiers_de_sortie résultats_attendus à_livrer",
	inputs:       "entrées entrée fichiers_d'entrée contexte références sources documents_fournis pièces_jointes situation données_d'entrée documents_de_référence",
	edit:         "corrige* correction* modifie* mettre…jour mets…jour mettez…jour actualise* ajuste* répare* retouche* adapte*",
	naming:       "appelle* nomme* intitule*", polite: "merci svp s'il_vous_plaît", repo: "branche test tests",
	bug: "anomalie", nounMarks: "du des", pointers: "ce cette", clitics: "-le -la -les",
	other:  "autre* supplémentaire*",
	toward: "au",
}
